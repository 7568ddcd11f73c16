package jsonrecord_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// Numbers come back byte for byte; input encoding/json would rewrite is an
// error.
func ExampleDecodeObject() {
	rec, _ := jsonrecord.DecodeObject([]byte(`{"id":12345678901234567891,"n":7,"x":0.5,"y":1.0}`))
	fmt.Printf("%T %T %T %T\n", rec["id"], rec["n"], rec["x"], rec["y"])
	out, _ := json.Marshal(rec)
	fmt.Println(string(out))

	_, err := jsonrecord.DecodeObject([]byte(`{"a":1,"a":2}`))
	fmt.Println(errors.Is(err, jsonrecord.ErrDuplicateKey), err)
	_, err = jsonrecord.DecodeObject([]byte(`null`))
	fmt.Println(errors.Is(err, jsonrecord.ErrNotObject), err)
	// Output:
	// json.Number int64 float64 json.Number
	// {"id":12345678901234567891,"n":7,"x":0.5,"y":1.0}
	// true duplicate key at byte 7: key "a" appears twice in one object
	// true not a JSON object at byte 0: top-level value is null, want an object
}
