package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

// TestReadmeOwnDatabase runs README.md's "On your own database" block
// exactly as printed, line by line through sh, on seed 003's own schema
// (testdata/schema/seed003.sql, unmodified) holding the seed's incident:
// order 8821's PAID (msg-7391) recorded SKIPPED after SHIPPED (msg-7392),
// its points never granted. Its `export` lines name the reader's servers:
// the test sets those variables for its own (MariaDB, kfake, a points
// service). Each line must exit 0, or the status its comment gives.
func TestReadmeOwnDatabase(t *testing.T) {
	t.Parallel()
	lines := readmeBlock(t, "## On your own database")
	bin := buildOpctl(t, "")
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "seed003.sql"))
	k := testenv.NewKafka(t, map[string]int32{"order-event": 8})
	points := newPointsService(t)

	// The seed's incident, as its consumer left it.
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	db.Exec(t, "INSERT INTO orders (order_id, status, created_at, updated_at) VALUES (8821, 'SHIPPED', ?, ?)", t0, t0.Add(2*time.Second))
	part, err := sources.PartitionFor("murmur2", []byte("8821"), 8)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i, ev := range []struct{ msg, expected, action string }{{"msg-7391", "PAID", "SKIPPED"}, {"msg-7392", "SHIPPED", "DONE"}} {
		at := t0.Add(time.Duration(i+1) * time.Second)
		last = k.Produce(t, "order-event", part, "8821", fmt.Sprintf(`{"msgId":%q,"orderId":8821,"expectedStatus":%q}`, ev.msg, ev.expected), nil, at)
		db.Exec(t, "INSERT INTO idempotent (msg_id, action, created_at) VALUES (?, ?, ?)", ev.msg, ev.action, at.Add(50*time.Millisecond))
	}
	k.Commit(t, "order-consumer", "order-event", part, last+1)

	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"OPCTL_MYSQL_DSN="+db.DSN, "OPCTL_BROKERS="+k.Brokers[0], "OPCTL_POINTS_URL="+points.URL,
		"REASON=INC-2041 points not granted", "NO_COLOR=1", "OPCTL_CONFIG=")
	exitOf := regexp.MustCompile(`\(exit (\d)\)`)
	ran := 0
	for _, line := range lines {
		cmd, comment, _ := strings.Cut(line, "#")
		cmd = strings.TrimSpace(cmd)
		if strings.HasPrefix(cmd, "export ") {
			continue // the reader's servers: the test's are in env
		}
		want := 0
		if m := exitOf.FindStringSubmatch(comment); m != nil {
			want = int(m[1][0] - '0')
		}
		c := exec.Command("sh", "-c", cmd)
		c.Dir, c.Env = dir, env
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("$ %s: %v", cmd, err)
		}
		ran++
		if code != want {
			t.Fatalf("$ %s\nexit %d, want %d\n%s", cmd, code, want, out.String())
		}
		t.Logf("$ %s\n%s", cmd, out.String())
		switch {
		case strings.HasPrefix(cmd, "opctl where 8821") && want == 3 && !strings.Contains(out.String(), "WRONGLY_SKIPPED"):
			t.Errorf("$ %s: not WRONGLY_SKIPPED\n%s", cmd, out.String())
		case strings.HasPrefix(cmd, "opctl where 8821") && want == 0 && !strings.Contains(out.String(), "COMPLETE"):
			t.Errorf("$ %s: not COMPLETE\n%s", cmd, out.String())
		case strings.HasPrefix(cmd, "opctl repair show") && !strings.Contains(out.String(), "redrive"):
			t.Errorf("$ %s: no redrive\n%s", cmd, out.String())
		}
	}
	if ran < 10 {
		t.Fatalf("only %d commands in the README's block", ran)
	}
	if n, posts := points.count("8821"); n != 1 || posts != 1 {
		t.Fatalf("the points service granted %d times (%d POSTs), want once", n, posts)
	}
}

// readmeBlock is the first ```sh block of README.md's section heading,
// one command per line.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// pointsService is seed 003's points service as the preset calls it:
// GET /grants?order_id= answers {"count": N}; POST /grant?order_id= grants
// once per Idempotency-Key.
type pointsService struct {
	*httptest.Server
	mu     sync.Mutex
	grants map[string]int
	keys   map[string]bool
	posts  int
}

func newPointsService(t *testing.T) *pointsService {
	p := &pointsService{grants: map[string]int{}, keys: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /grants", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int{"count": p.grants[r.URL.Query().Get("order_id")]})
	})
	mux.HandleFunc("POST /grant", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.posts++
		if k := r.Header.Get("Idempotency-Key"); !p.keys[k] {
			p.keys[k] = true
			p.grants[r.URL.Query().Get("order_id")]++
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "APPLIED"})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *pointsService) count(order string) (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grants[order], p.posts
}
