package main

// Records through the binary: numbers pass through byte for byte, lines
// that encoding/json would rewrite silently follow the malformed policy and
// are reported with file and line, and renames are simultaneous and never
// overwrite a field unless asked to.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writePipeline writes a pipeline file into dir and returns its path.
func writePipeline(t *testing.T, dir, yaml string) string {
	t.Helper()
	p := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// committedLines returns the lines of the committed (not hidden) part
// files under dir, sorted.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	var lines []string
	eachCommittedLine(t, dir, func(_, line string) { lines = append(lines, line) })
	slices.Sort(lines)
	return lines
}

const fileToFile = `name: records
parallelism: 2
restart: {strategy: none}
checkpoint:
  interval: 200ms
  dir: ${OUT}/checkpoints
source:
  type: file
  options:
    paths: ["${IN}"]
    on-malformed: ${POLICY:-fail}
%s
sink:
  type: file
  options:
    path: ${OUT}/output
`

// numbersLine is a record whose numbers a float64 would change: beyond
// 2^53, beyond int64 (big and lim differ only beyond float64's
// precision), and literals such as 1.0 and 1e3. Its keys are
// sorted and it has no blanks, as encoding/json writes it.
func numbersLine(i int) string {
	return fmt.Sprintf(`{"a":%d,"b":"s%d","big":1234567890123456789%d,"f":1.0,"id":%d,"lim":12345678901234567895,"n":{"neg":-900719925474099%d,"x":[1e3,-0.5,2.50,1E+2,0.1]},"small":900719925474099%d}`,
		i, i, i%10, i, 3+i%7, 3+i%7)
}

// TestRecordsNumbersPassThrough: a file → file pipeline writes every number
// back byte for byte, and transforms compare big numbers exactly.
func TestRecordsNumbersPassThrough(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const n = 500
	var in []string
	for i := range n {
		in = append(in, numbersLine(i))
	}
	t.Run("pass-through", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := writePipeline(t, dir, fmt.Sprintf(fileToFile, ""))
		r := run(t, []string{"IN=" + filepath.Join(dir, "in.jsonl"), "OUT=" + dir}, "run", "--progress", "off", p)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		got := committedLines(t, filepath.Join(dir, "output"))
		want := slices.Sorted(slices.Values(in))
		if !slices.Equal(got, want) {
			t.Fatalf("output differs from input: %d lines, want %d; first line %q, want %q", len(got), len(want), first(got), first(want))
		}
	})
	t.Run("filter-and-swap", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		transforms := "transforms:\n" +
			"  - filter: 'big > lim && id % 2 == 0 && f == 1'\n" +
			"  - rename: {a: b, b: a}\n"
		p := writePipeline(t, dir, fmt.Sprintf(fileToFile, transforms))
		r := run(t, []string{"IN=" + filepath.Join(dir, "in.jsonl"), "OUT=" + dir}, "run", "--progress", "off", p)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		var want []string
		for i := range n {
			if i%10 <= 5 || i%2 != 0 {
				continue
			}
			// a and b swapped; keys stay sorted.
			l := strings.Replace(numbersLine(i), fmt.Sprintf(`"a":%d,"b":"s%d"`, i, i), fmt.Sprintf(`"a":"s%d","b":%d`, i, i), 1)
			want = append(want, l)
		}
		slices.Sort(want)
		got := committedLines(t, filepath.Join(dir, "output"))
		if !slices.Equal(got, want) {
			t.Fatalf("got %d lines, want %d; first line %q, want %q", len(got), len(want), first(got), first(want))
		}
	})
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestRecordsMalformedLines: a line with invalid UTF-8, a repeated key or a
// bare null fails the job by default, naming the file, the line and the
// problem; with on-malformed: skip the other lines are written.
func TestRecordsMalformedLines(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	for _, c := range []struct{ name, line, problem string }{
		{"invalid-utf8", "{\"id\":3,\"s\":\"caf\xe9\"}", "invalid UTF-8"},
		{"duplicate-key", `{"id":3,"n":{"k":1,"k":2}}`, `duplicate key at byte 19: key "k" appears twice`},
		{"null", `null`, "not a JSON object at byte 0: top-level value is null"},
		{"array", `[{"id":3}]`, "not a JSON object at byte 0: top-level value is an array"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.jsonl")
			content := `{"id":1}` + "\n" + `{"id":2}` + "\n" + c.line + "\n" + `{"id":4}` + "\n"
			if err := os.WriteFile(in, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			p := writePipeline(t, dir, fmt.Sprintf(fileToFile, ""))
			r := run(t, []string{"IN=" + in, "OUT=" + dir}, "run", "--progress", "off", p)
			// The path came from ${IN}: it is shown as ${IN}.
			if want := "${IN} line 3 (offset 18): file: malformed record: JSON line: " + c.problem; r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Fatalf("exit %d, want 1 with %q in stderr:\n%s", r.code, want, r.stderr)
			}
			r = run(t, []string{"IN=" + in, "OUT=" + dir, "POLICY=skip"}, "run", "--progress", "off", p)
			if r.code != 0 {
				t.Fatalf("skip: exit %d\n%s", r.code, r.stderr)
			}
			if got, want := committedLines(t, filepath.Join(dir, "output")), []string{`{"id":1}`, `{"id":2}`, `{"id":4}`}; !slices.Equal(got, want) {
				t.Errorf("skip: got %q, want %q", got, want)
			}
		})
	}
}

// TestRecordsRename: a swap keeps both fields; a rename onto an existing
// field fails the job naming the transform and the field unless the
// rename says overwrite: true.
func TestRecordsRename(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const pipeline = `restart: {strategy: none}
source:
  type: datagen
  options: {count: 20}
transforms:
  - select: [id, user]
  - %s
sink:
  type: print
`
	runRename := func(t *testing.T, rename string) result {
		p := writePipeline(t, t.TempDir(), fmt.Sprintf(pipeline, rename))
		return run(t, nil, "run", "--progress", "off", p)
	}
	records := func(t *testing.T, out string) []map[string]any {
		t.Helper()
		var recs []map[string]any
		for l := range strings.Lines(out) {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			recs = append(recs, m)
		}
		if len(recs) != 20 {
			t.Fatalf("got %d records, want 20:\n%s", len(recs), out)
		}
		return recs
	}
	t.Run("swap", func(t *testing.T) {
		r := runRename(t, "rename: {id: user, user: id}")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		for _, m := range records(t, r.stdout) {
			id, _ := m["user"].(float64)
			if len(m) != 2 || m["id"] != fmt.Sprintf("user-%d", int(id)%10) {
				t.Errorf("swap: got %v", m)
			}
		}
	})
	t.Run("overwrite-refused", func(t *testing.T) {
		r := runRename(t, "rename: {id: user}")
		if want := `transform rename "rename-2"`; r.code != 1 || !strings.Contains(r.stderr, want) ||
			!strings.Contains(r.stderr, `renaming "id" to "user", but the record already has a field "user" (set overwrite: true on the rename to replace it)`) {
			t.Fatalf("exit %d, want 1 naming the transform and the field:\n%s", r.code, r.stderr)
		}
	})
	t.Run("overwrite-allowed", func(t *testing.T) {
		r := runRename(t, "rename: {id: user}\n    overwrite: true")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		for _, m := range records(t, r.stdout) {
			if _, ok := m["user"].(float64); !ok || len(m) != 1 {
				t.Errorf("overwrite: got %v", m)
			}
		}
	})
}
