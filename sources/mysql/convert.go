package mysql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// convertValue maps a driver value to a sources.Value by the column's
// database type: integer types (BOOL and TINYINT(1) included) → int64,
// BIT → int64, DECIMAL → string exactly as the server prints it ("-30.00"),
// FLOAT/DOUBLE → float64, DATE/DATETIME/TIMESTAMP → time.Time (parseTime,
// in the session's time zone: zone.go), NULL → nil, everything else →
// string. An unsigned BIGINT above math.MaxInt64 stays a decimal string.
func convertValue(dbType string, v any) sources.Value {
	switch v := v.(type) {
	case nil:
		return nil
	case int64:
		return v
	case uint64:
		if v > math.MaxInt64 {
			return strconv.FormatUint(v, 10)
		}
		return int64(v)
	case float32:
		// Go through the shortest decimal form so that a FLOAT 0.1 reads
		// 0.1, not 0.10000000149011612.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
		return f
	case float64:
		return v
	case time.Time:
		return v
	case []byte:
		return convertText(dbType, v)
	case string:
		return convertText(dbType, []byte(v))
	case bool:
		if v {
			return int64(1)
		}
		return int64(0)
	default:
		return fmt.Sprint(v)
	}
}

// convertText converts a value the driver returned as bytes.
func convertText(dbType string, b []byte) sources.Value {
	t := strings.TrimPrefix(dbType, "UNSIGNED ")
	switch t {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return n
		}
		return string(b)
	case "FLOAT", "DOUBLE":
		if f, err := strconv.ParseFloat(string(b), 64); err == nil {
			return f
		}
		return string(b)
	case "BIT":
		if len(b) <= 8 {
			var n uint64
			for _, c := range b {
				n = n<<8 | uint64(c)
			}
			if n <= math.MaxInt64 {
				return int64(n)
			}
		}
		return string(b)
	}
	// DECIMAL keeps the server's text; text, JSON, ENUM, TIME, binary: string.
	return string(b)
}

// asString renders a value as the string the operator would see: strings as
// they are, integers in decimal, times in RFC 3339.
func asString(v sources.Value) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// asInt64 reads an integer value (an integer column, or a decimal string).
func asInt64(v sources.Value) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// asTime reads a DATE/DATETIME/TIMESTAMP value.
func asTime(v sources.Value) (time.Time, bool) {
	t, ok := v.(time.Time)
	return t, ok
}
