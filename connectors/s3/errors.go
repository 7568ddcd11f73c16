package s3

import (
	"errors"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// isCode reports whether err is an S3 error with one of codes.
func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}

// isNotFound reports whether err is a 404: NoSuchKey, NotFound (HEAD has
// no body) or NoSuchUpload.
func isNotFound(err error) bool {
	if isCode(err, "NoSuchKey", "NotFound", "NoSuchUpload") {
		return true
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}
