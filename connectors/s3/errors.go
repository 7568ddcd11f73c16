package s3

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
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

// authCodes are the error codes of requests the server refused for their
// credentials.
var authCodes = []string{"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "InvalidToken", "ExpiredToken", "InvalidSecurity"}

// isAuth reports whether err is a refusal of the credentials.
func isAuth(err error) bool {
	if isCode(err, authCodes...) {
		return true
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && (re.HTTPStatusCode() == 401 || re.HTTPStatusCode() == 403)
}

// authErrors is an SDK middleware that names the server in errors about
// credentials, so that a wrong key in one of several clients (checkpoints,
// a sink, a source) is told apart. It never names the keys.
func authErrors(server string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("SluiceAuthErrors",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil && isAuth(err) {
					err = fmt.Errorf("%s refused the credentials (check the access key, secret key and session token): %w", server, err)
				}
				return out, md, err
			}), middleware.Before)
	}
}
