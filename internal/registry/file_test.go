package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileSourceReadsSinkOutput: a file sink whose output a file source
// of the same pipeline reads is refused with discovery (the job would read
// its own output forever) and warned about without. Relative and absolute
// paths, ".." components, globs, symbolic links (also where the sink's
// directory does not exist yet) and hidden directories (which the source
// skips) are taken into account; the error names both paths.
func TestFileSourceReadsSinkOutput(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	for _, d := range []string{"data/in", "data/out", "other", "data/out/sub"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile("data/out/old.jsonl", []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "data"), "link"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		src  string
		sink string
		loop bool
	}{
		{"same directory", "data/out", "data/out", true},
		{"relative and absolute", filepath.Join(root, "data/out"), "./data/x/../out", true},
		{"parent directory", "data", "data/out", true},
		{"parent, sink not created yet", "data", "data/new/out", true},
		{"sibling", "data/in", "data/out", false},
		{"sink under a hidden directory", "data", "data/.hidden/out", false},
		{"sink under an underscore directory", "data", "data/_tmp/out", false},
		{"source in a subdirectory of the sink", "data/out/sub", "data/out", false},
		{"one file beside the output", "data/out/old.jsonl", "data/out", false},
		{"glob of output files", "data/out/*.jsonl", "data/out", true},
		{"glob of other files", "data/out/*.csv", "data/out", false},
		{"glob of part files", filepath.Join(root, "data/out/part-*"), "data/out", true},
		{"glob of directories", "data/*", "data/out", true},
		{"glob of other directories", "data/i*", "data/out", false},
		{"glob of directories, sink not created yet", "d*", "data/new", true},
		{"symbolic link to the sink's parent", "link", "data/out", true},
		{"sink through a symbolic link", "data/out", "link/out", true},
		{"sink not created yet through a symbolic link", "data", "link/new/out", true},
		{"glob through a symbolic link", "link/out/*", "data/out", true},
		{"glob matching a symbolic link", "l*", "data/out", true},
		{"unrelated", "other", "data/out", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := NewOptions(map[string]any{"paths": []string{"data/in", c.src}, "discovery": time.Second})
			snk := NewOptions(map[string]any{"path": c.sink, "prefix": "part", "suffix": ".jsonl"})
			warning, err := checkFileLoop("file", src, snk)
			if !c.loop {
				if err != nil || warning != "" {
					t.Fatalf("got error %v, warning %q; want neither", err, warning)
				}
				return
			}
			if err == nil {
				t.Fatal("with discovery: no error")
			}
			for _, want := range []string{"path " + `"` + c.sink + `"`, `"` + c.src + `"`, "discovery"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			src = NewOptions(map[string]any{"paths": []string{c.src}, "discovery": time.Duration(0)})
			warning, err = checkFileLoop("file", src, snk)
			if err != nil || !strings.Contains(warning, `"`+c.src+`"`) || !strings.Contains(warning, `"`+c.sink+`"`) {
				t.Fatalf("without discovery: error %v, warning %q; want a warning naming both paths", err, warning)
			}
		})
	}
	// Values from the environment are not shown; the fields name them.
	src := NewOptions(map[string]any{"paths": []string{"data"}, "discovery": time.Second}).MarkFromEnvironment("paths")
	snk := NewOptions(map[string]any{"path": "data/out"}).MarkFromEnvironment("path")
	_, err := checkFileLoop("file", src, snk)
	if err == nil || strings.Contains(err.Error(), "data") || !strings.Contains(err.Error(), "sink.options.path") || !strings.Contains(err.Error(), "source.options.paths") {
		t.Errorf("paths from the environment: got %v, want an error naming the fields, not the values", err)
	}
	if w, err := checkFileLoop("datagen", NewOptions(nil), NewOptions(map[string]any{"path": "data/out"})); w != "" || err != nil {
		t.Errorf("another source: %q %v", w, err)
	}
}
