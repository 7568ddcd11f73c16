//go:build !unix

package checkpoint

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("would block")

// flock does nothing where flock(2) is unavailable: the directory is not
// protected against a second process.
func flock(*os.File) error { return nil }
