//go:build unix

package file

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSinkFileModes checks the modes of what the sink creates: by default
// part files 0600 and directories 0700 (other users cannot read the
// output), and FileMode(0o640) gives 0640 files and 0750 directories. The
// umask is cleared so that it cannot hide a too open mode.
func TestSinkFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, tt := range []struct {
		name          string
		opts          []SinkOption
		file, dirMode fs.FileMode
	}{
		{"default", nil, 0o600, 0o700},
		{"0640", []SinkOption{FileMode(0o640)}, 0o640, 0o750},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, base := t.TempDir(), t.TempDir()
			want := writeInput(t, in, 2, 50)
			out := filepath.Join(base, "a", "out")
			opts := append([]SinkOption{WithBuckets(DateTimeBuckets[string]("2006-01-02", nil, ProcessingTime))}, tt.opts...)
			if _, err := runCopy(t, in, out, jobOpts{sinkOpts: opts}); err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, want, readOutput(t, out), false)
			files, dirs := 0, 0
			err := filepath.WalkDir(filepath.Join(base, "a"), func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				w := tt.file
				if d.IsDir() {
					w = tt.dirMode
					dirs++
				} else {
					files++
				}
				if got := fi.Mode().Perm(); got != w {
					t.Errorf("%s: mode %#o, want %#o", p, got, w)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if files == 0 || dirs < 3 {
				t.Fatalf("walked %d files, %d directories: want part files under a/out/<bucket>", files, dirs)
			}
		})
	}
}

func TestFileModeInvalid(t *testing.T) {
	for _, m := range []fs.FileMode{0o400, 0o1600, fs.ModeDir | 0o700} {
		_, err := NewRowSink(t.TempDir(), LinesFormat(), FileMode(m))
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("FileMode(%#o): got %v, want ErrInvalidConfig", m, err)
		}
	}
}
