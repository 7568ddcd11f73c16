package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// searchDeadLetterPipeline: datagen (throttled, so a kill -9 lands
// mid-run) → map → opensearch with on-item-error: dead-letter. Every
// record whose id ends in 07 has an amount the index's mapping (long)
// rejects.
const searchDeadLetterPipeline = `name: search-dead-letters
parallelism: 2
delivery: exactly-once
restart:
  strategy: fixed-delay
  attempts: 3
  delay: 100ms
checkpoint:
  interval: 200ms
  dir: ${CKPT}
source:
  type: datagen
  options:
    count: ${COUNT}
    splits: 2
    rate: 1000
transforms:
  - map: '{"id": id, "amount": id % 100 == 7 ? "not-a-number-" + string(id) : amount}'
sink:
  type: opensearch
  options:
    hosts: ["${HOSTS}"]
    flavor: ${FLAVOR}
    index: ${INDEX}
    id: string(id)
    on-item-error: dead-letter
    dead-letter-index: ${DLQ}
    sink.bulk-flush.max-actions: 100
    sink.bulk-flush.interval: 100ms
`

// searchNodes are the real nodes the binary tests run against, where
// their variables are set.
var searchNodes = []struct{ name, env string }{
	{"opensearch", "SLUICE_OPENSEARCH_URL"},
	{"elasticsearch", "SLUICE_ELASTICSEARCH_URL"},
}

// TestSearchDeadLetterKill9: documents the mapping rejects land in the
// dead-letter index with index, id and the node's reason, the others in
// the index; the process is killed with SIGKILL after a checkpoint and
// resumed with --from; afterwards both indexes hold exactly what they
// should, each document once (the dead letters' ids are derived from the
// rejected documents', so the replay rewrote them).
func TestSearchDeadLetterKill9(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	for _, n := range searchNodes {
		t.Run(n.name, func(t *testing.T) {
			node := strings.TrimSuffix(os.Getenv(n.env), "/")
			if node == "" {
				t.Skipf("%s is not set: start a node with `eval \"$(scripts/%s.sh start)\"; export %s`", n.env, n.name, n.env)
			}
			searchDeadLetterRun(t, node, n.name)
		})
	}
}

func searchDeadLetterRun(t *testing.T, node, flavor string) {
	const count = 4000
	index, dlq := osIndexName("cli-dl"), osIndexName("cli-dlq")
	if code, b := osDo(t, http.MethodPut, node+"/"+index, `{"settings": {"number_of_shards": 1, "number_of_replicas": 0},
		"mappings": {"properties": {"id": {"type": "long"}, "amount": {"type": "long"}}}}`); code != http.StatusOK {
		t.Fatalf("create index: %d %s", code, b)
	}
	defer osDo(t, http.MethodDelete, node+"/"+index, "")
	defer osDo(t, http.MethodDelete, node+"/"+dlq, "")
	work := t.TempDir()
	ckpt := filepath.Join(work, "checkpoints")
	file := writePipeline(t, work, searchDeadLetterPipeline)
	env := []string{"CKPT=" + ckpt, "COUNT=" + strconv.Itoa(count), "HOSTS=" + node, "FLAVOR=" + flavor, "INDEX=" + index, "DLQ=" + dlq}

	// First run: killed with SIGKILL once a checkpoint completed and
	// some dead letters are written.
	p := start(t, env, "run", "--progress", "off", file)
	latest := func() string { b, _ := os.ReadFile(filepath.Join(ckpt, "_latest")); return string(b) }
	waitFor(t, p, "a checkpoint and some dead letters", 2*time.Minute, func() bool {
		return latest() != "" && osCount(t, node, dlq) >= 3
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	t.Logf("killed after checkpoint %s: %d documents, %d dead letters", strings.TrimSpace(latest()), osCount(t, node, index), osCount(t, node, dlq))

	r := run(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if r.code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", r.code, r.stderr)
	}

	bad := func(id int) bool { return id%100 == 7 }
	hits := osAll(t, node, index)
	seen := map[string]bool{}
	for _, h := range hits {
		if seen[h.ID] {
			t.Fatalf("document %s twice", h.ID)
		}
		seen[h.ID] = true
		id, err := strconv.Atoi(h.ID)
		if err != nil || id < 0 || id >= count || bad(id) {
			t.Fatalf("unexpected document %q: %v", h.ID, h.Source)
		}
		want := map[string]any{"id": float64(id), "amount": float64(id * 37 % 1000)}
		if fmt.Sprint(h.Source) != fmt.Sprint(want) {
			t.Fatalf("document %s is %v, want %v", h.ID, h.Source, want)
		}
	}
	wantDead := 0
	for id := range count {
		if bad(id) {
			wantDead++
		} else if !seen[strconv.Itoa(id)] {
			t.Fatalf("document %d is missing", id)
		}
	}
	dead := osAll(t, node, dlq)
	if len(dead) != wantDead {
		t.Errorf("%d dead letters, want %d", len(dead), wantDead)
	}
	seenDead := map[string]bool{}
	for _, h := range dead {
		id, _ := h.Source["id"].(string)
		n, err := strconv.Atoi(id)
		if err != nil || !bad(n) || seenDead[id] || h.ID != index+"/"+id {
			t.Fatalf("dead letter %s: %v", h.ID, h.Source)
		}
		seenDead[id] = true
		reason, _ := h.Source["reason"].(string)
		typ, _ := h.Source["error_type"].(string)
		doc, _ := h.Source["document"].(string)
		if h.Source["index"] != index || h.Source["status"] != float64(400) || h.Source["op"] != "index" ||
			!strings.Contains(reason, "failed to parse field [amount]") || !strings.HasSuffix(typ, "parsing_exception") ||
			!strings.Contains(doc, `"not-a-number-`+id+`"`) {
			t.Errorf("dead letter %s: %v", h.ID, h.Source)
		}
	}
	t.Logf("%d documents, %d dead letters; resumed run: %s", len(hits), len(dead), firstMatch(r.stderr, `job .* restarts`))
}

// TestSearchDeadLetterOptions: on-item-error: dead-letter needs
// dead-letter-index, dead-letter-index needs dead-letter, flavor takes
// three names; each refused at validation (exit 2) naming the option.
func TestSearchDeadLetterOptions(t *testing.T) {
	base := `name: x
source:
  type: datagen
  options:
    count: 10
sink:
  type: opensearch
  options:
    hosts: ["http://127.0.0.1:9"]
    index: x
    id: string(id)
`
	for _, c := range []struct{ opts, want string }{
		{"    on-item-error: dead-letter\n", "dead-letter needs dead-letter-index"},
		{"    dead-letter-index: dlq\n", "dead-letter-index: only with on-item-error: dead-letter"},
		{"    on-item-error: dead-letter\n    dead-letter-index: Bad*Name\n", "dead-letter-index"},
		{"    flavor: solr\n", "flavor"},
	} {
		file := writePipeline(t, t.TempDir(), base+c.opts)
		r := run(t, nil, "validate", file)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, want 2 and %q\n%s", c.opts, r.code, c.want, r.stderr)
		}
	}
	file := writePipeline(t, t.TempDir(), base+"    flavor: elasticsearch\n    on-item-error: dead-letter\n    dead-letter-index: dlq\n")
	if r := run(t, nil, "validate", file); r.code != 0 {
		t.Errorf("valid options: exit %d\n%s", r.code, r.stderr)
	}
}
