package mysql

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/sources/config"
)

// CheckDSN reports what is wrong with a go-sql-driver/mysql DSN for opctl,
// or "" (docs/config.md#mysql): its form first (config.CheckDSN: an
// address in tcp(...) or unix(...), a database name, key=value
// parameters), then each parameter as the driver reads it
// (mysql.ParseDSN), then what opctl refuses of what the driver accepts:
// the parameters of refusedParam, a parameter the driver does not know
// (it would send it to the server as a session variable) other than the
// session variables of sessionVars, and charset and collation values
// that are not plain names (the driver writes them into SET NAMES). The
// problem reads after the DSN ("mysql.dsn "u:***@..." has ...") and never
// holds the password: each parameter is read alone, without the
// credentials. It does not connect. config.ValidateMySQL takes it as the
// check of the driver (sources/connect passes it).
func CheckDSN(dsn string) string {
	if p := config.CheckDSN(dsn); p != "" {
		return p
	}
	_, query, _ := strings.Cut(dsn[strings.LastIndexByte(dsn, '/')+1:], "?")
	var driver []string // the driver's parameters, computed when needed
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		key, raw, _ := strings.Cut(kv, "=")
		if why := refusedParam(key); why != "" {
			return fmt.Sprintf("has parameter %q, which opctl refuses: %s; remove it", key, why)
		}
		if kind, ok := sessionVars()[key]; ok {
			if p := checkSessionVar(key, raw, kind); p != "" {
				return p
			}
			continue
		}
		cfg, err := gomysql.ParseDSN("/db?" + kv)
		if err != nil {
			return fmt.Sprintf("has %q; want %s", kv, wantOf(err))
		}
		if _, unknown := cfg.Params[key]; unknown {
			if driver == nil {
				driver = driverParams()
			}
			return unknownParam(key, driver)
		}
		switch key {
		case "charset":
			for cs := range strings.SplitSeq(raw, ",") {
				if !plainName(cs) {
					return fmt.Sprintf("has %q; want charset names such as utf8mb4", kv)
				}
			}
		case "collation":
			if !plainName(raw) {
				return fmt.Sprintf("has %q; want a collation name such as utf8mb4_general_ci", kv)
			}
		}
	}
	return ""
}

// refusedParam is why opctl refuses a parameter the driver accepts (or
// accepted), or "".
func refusedParam(key string) string {
	switch key {
	case "allowAllFiles":
		return "it would let the server read any file of this machine (LOAD DATA LOCAL INFILE); opctl never loads files"
	case "clientFoundRows":
		return "opctl counts the rows a statement changed (a repair statement that changes nothing is refused); with it, a row matched but left unchanged would count"
	case "columnsWithAlias":
		return "opctl reads evidence columns by their names (a reverse statement binds :column); with it, they would be renamed table.column"
	case "serverPubKey":
		return "it names a key registered in Go code (mysql.RegisterServerPubKey), which opctl does not do; use tls=true"
	case "strict":
		return "it was removed from go-sql-driver/mysql"
	}
	return ""
}

// Kinds of session variable values.
const (
	sessionInt = iota
	sessionNumber
	sessionText
)

// sessionVars are the session variables a DSN may set (the driver sends
// each as SET name=value on every connection), with the kind of their
// values: the timeouts a team bounds its statements with, and time_zone
// (opctl sets its own, mysql.time_zone).
func sessionVars() map[string]int {
	return map[string]int{
		"innodb_lock_wait_timeout": sessionInt,
		"lock_wait_timeout":        sessionInt,
		"max_execution_time":       sessionInt,
		"max_statement_time":       sessionNumber,
		"time_zone":                sessionText,
	}
}

// checkSessionVar checks the value of a session variable: it reaches SQL
// as written, so a number is only digits.
func checkSessionVar(key, raw string, kind int) string {
	val, err := url.QueryUnescape(raw)
	if err != nil {
		return fmt.Sprintf("has parameter %q that is not properly %%-escaped", key+"="+raw)
	}
	digits := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789") == ""
	}
	switch kind {
	case sessionInt:
		if !digits(val) {
			return fmt.Sprintf("has %q; want a whole number", key+"="+raw)
		}
	case sessionNumber:
		whole, frac, dot := strings.Cut(val, ".")
		if !digits(whole) || dot && frac != "" && !digits(frac) {
			return fmt.Sprintf("has %q; want a number", key+"="+raw)
		}
	}
	return ""
}

// wantOf is what a parameter the driver refused should be, from the
// driver's error.
func wantOf(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "invalid bool value"):
		return "true or false"
	case strings.Contains(msg, "config name"), strings.Contains(msg, "TLS"):
		return "true, false, skip-verify or preferred (opctl registers no named TLS configuration)"
	case strings.Contains(msg, "time zone"):
		return "a time zone name such as UTC or Asia%2FShanghai (opctl reads times in mysql.time_zone anyway)"
	case strings.HasPrefix(msg, "time: "), strings.Contains(msg, "timeTruncate"):
		return "a duration such as 5s or 500ms"
	case strings.HasPrefix(msg, "strconv."):
		return "a whole number"
	}
	return "a value the driver reads (it says: " + msg + ")"
}

// plainName reports whether s is a charset or collation name: letters,
// digits and underscores.
func plainName(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

// unknownParam is the problem of a parameter neither the driver nor opctl
// knows: the driver would send it to the server as a session variable.
func unknownParam(key string, driver []string) string {
	var accepted []string
	for _, d := range driver {
		if refusedParam(d) == "" {
			accepted = append(accepted, d)
		}
	}
	var session []string
	for s := range sessionVars() {
		session = append(session, s)
	}
	slices.Sort(session)
	return fmt.Sprintf("has unknown parameter %q%s: the driver would send it to the server as a session variable; remove it (accepted: the driver's %s; the session variables %s)",
		key, config.DidYouMean(key, append(slices.Clone(accepted), session...)), strings.Join(accepted, ", "), strings.Join(session, ", "))
}

// driverParams lists the parameters go-sql-driver/mysql reads, sorted, as
// its own Config.FormatDSN writes them: a Config with every option away
// from its default (the exported fields by their kind, the others by the
// driver's options) formatted as a DSN.
func driverParams() []string {
	c := gomysql.NewConfig()
	_ = c.Apply(gomysql.TimeTruncate(time.Second), gomysql.EnableCompression(true), gomysql.Charset("x", ""))
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch {
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(time.Second))
		case f.Type() == reflect.TypeFor[*time.Location]():
			f.Set(reflect.ValueOf(time.FixedZone("X", 3600)))
		case f.Kind() == reflect.Bool:
			f.SetBool(!f.Bool())
		case f.Kind() == reflect.Int:
			f.SetInt(f.Int() + 1)
		case f.Kind() == reflect.String:
			f.SetString("x")
		}
	}
	_, query, _ := strings.Cut(c.FormatDSN(), "?")
	var names []string
	for kv := range strings.SplitSeq(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); k != "" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}
