package format

// Blank imports pin the modules the format codecs and the file formats are
// built on, so that helpers working in parallel share one go.mod. Remove
// this file once every module is imported for real.
import (
	_ "github.com/bufbuild/protocompile"
	_ "github.com/hamba/avro/v2"
	_ "github.com/hamba/avro/v2/ocf"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/twmb/franz-go/pkg/sr"
	_ "google.golang.org/protobuf/types/dynamicpb"
)
