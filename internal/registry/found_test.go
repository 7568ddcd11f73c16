package registry

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaRecordsFound: a source told the first step's fields
// (Codecs.Lookup) checks each value in the scan that finds them: the same
// error text as the codec's check for malformed values, and for the
// others the members jsonrecord.Lookup finds (Record.Found), which a
// changed value or another key list does not get.
func TestKafkaRecordsFound(t *testing.T) {
	js := jsonCodec(t)
	keys := []string{"amount", "id", "pad", "user"}
	found := kafkaRecords(&Codecs{Value: js, Lookup: keys}, "json", false)
	plain := kafkaRecords(&Codecs{Value: js}, "json", false)
	hits := 0
	for _, v := range []string{
		`{"amount":37,"id":1234567,"pad":"q3ZkTa9Lm2Xc7Vb1Nn4Rt6Yu8Ii0Oo5Pp3Aa","user":"user-1234"}`,
		` { "user" : "\u0075" , "amount":[1,{"id":2}] ,"x":null}`, `{"\u0061mount":1.0,"id":null}`, `{}`,
		`{"amount":1,"amount":2}`, `{"amount":1`, `[1]`, `null`, "{\"user\":\"\xff\"}", `{"id":1}x`, `nope`, ``,
		`{"pad":"` + strings.Repeat("x", 70000) + `","id":7}`, // too long for Found: still checked
		`{"pad":"` + strings.Repeat("x", 300) + `","id":7}`,   // a member too long for Found
	} {
		kr := &kgo.Record{Topic: "in", Value: []byte(v)}
		r, err := found.Deserialize(kr)
		_, perr := plain.Deserialize(kr)
		if fmt.Sprint(err) != fmt.Sprint(perr) {
			t.Fatalf("%.60q: error %v with the lookup, %v without", v, err, perr)
		}
		if err != nil {
			continue
		}
		want := make([][]byte, len(keys))
		if err := jsonrecord.Lookup([]byte(v), keys, want); err != nil {
			t.Fatal(err)
		}
		got := make([][]byte, len(keys))
		if !r.Checked() {
			t.Fatalf("%.60q: not checked", v)
		}
		if r.Found(keys, got) {
			hits++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%.60q: found %q, Lookup %q", v, got, want)
			}
		} else if len(v) < 300 {
			t.Fatalf("%.60q: nothing found", v)
		}
		if r.Found(append([]string(nil), keys...), got) || r.WithRawValue([]byte(`{}`)).Found(keys, got) ||
			r.WithValue(map[string]any{}).Found(keys, got) {
			t.Fatalf("%.60q: found for another key list or a changed value", v)
		}
	}
	if hits < 4 {
		t.Fatalf("%d records with members found", hits)
	}
}
