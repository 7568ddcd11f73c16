package format

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func init() {
	prev := registerMore
	registerMore = func(f *Formats) {
		prev(f)
		f.Register("protobuf", newProtobuf)
	}
}

// protoMainFile is the name the registry's schema text is compiled under;
// the references keep their own names (the import paths).
const protoMainFile = "sluice-registry-schema.proto"

// protoCodec reads and writes Protobuf in the Confluent wire format: the
// schema id, the message-index list (which message of the file), then the
// message. Schemas are .proto text compiled with protocompile.
type protoCodec struct {
	reg     *registry[protoreflect.FileDescriptor]
	message string // Config.ProtoMessage
	// fullName is the configured schema's message, for the record
	// strategies.
	fullName string
}

func newProtobuf(c Config) (Codec, error) {
	reg, err := newRegistry("protobuf", c, sr.TypeProtobuf, parseProto)
	if err != nil {
		return nil, err
	}
	pc := &protoCodec{reg: reg, message: c.ProtoMessage}
	if c.Registry.Schema != "" {
		fd, err := parseProto(context.Background(), sr.Schema{Schema: c.Registry.Schema}, nil)
		if err != nil {
			return nil, fmt.Errorf("protobuf format: the configured schema: %w", err)
		}
		md, _, err := pc.writerMessage(fd)
		if err != nil {
			return nil, fmt.Errorf("protobuf format: the configured schema: %w", err)
		}
		pc.fullName = string(md.FullName())
	} else if strings.Contains(c.ProtoMessage, ".") {
		// Without a schema, a full message name still names the
		// record strategies' subject.
		pc.fullName = c.ProtoMessage
	}
	return pc, nil
}

func parseProto(ctx context.Context, s sr.Schema, refs map[string]string) (protoreflect.FileDescriptor, error) {
	srcs := map[string]string{protoMainFile: s.Schema}
	for name, text := range refs {
		srcs[name] = text
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(srcs)}),
		MaxParallelism: 1,
	}
	files, err := c.Compile(ctx, protoMainFile)
	if err != nil {
		return nil, fmt.Errorf("invalid Protobuf schema: %w", err)
	}
	return files[0], nil
}

// writerMessage finds the configured message (default the file's first)
// and its Confluent index path.
func (c *protoCodec) writerMessage(fd protoreflect.FileDescriptor) (protoreflect.MessageDescriptor, []int, error) {
	if fd.Messages().Len() == 0 {
		return nil, nil, fmt.Errorf("the schema defines no message")
	}
	if c.message == "" {
		return fd.Messages().Get(0), []int{0}, nil
	}
	var found []protoreflect.MessageDescriptor
	var paths [][]int
	var walk func(ms protoreflect.MessageDescriptors, path []int)
	walk = func(ms protoreflect.MessageDescriptors, path []int) {
		for i, m := range declared(ms) {
			p := append(slices.Clone(path), i)
			if string(m.FullName()) == c.message || string(m.Name()) == c.message {
				found, paths = append(found, m), append(paths, p)
			}
			walk(m.Messages(), p)
		}
	}
	walk(fd.Messages(), nil)
	for i, m := range found {
		if string(m.FullName()) == c.message {
			return m, paths[i], nil
		}
	}
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("no message %q in the schema", c.message)
	case 1:
		return found[0], paths[0], nil
	}
	return nil, nil, fmt.Errorf("message name %q is ambiguous (%s, %s): use the full name", c.message, found[0].FullName(), found[1].FullName())
}

// declared returns the messages as the .proto declares them: without the
// entry messages the compiler makes for map fields. Confluent's message
// indexes do not count these (the Java serializer indexes the parsed .proto).
func declared(ms protoreflect.MessageDescriptors) []protoreflect.MessageDescriptor {
	out := make([]protoreflect.MessageDescriptor, 0, ms.Len())
	for i := range ms.Len() {
		if !ms.Get(i).IsMapEntry() {
			out = append(out, ms.Get(i))
		}
	}
	return out
}

// messageAt finds the message of an index path.
func messageAt(fd protoreflect.FileDescriptor, path []int) (protoreflect.MessageDescriptor, error) {
	ms := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range path {
		d := declared(ms)
		if i < 0 || i >= len(d) {
			return nil, fmt.Errorf("message index %v names no message of the schema", path)
		}
		md = d[i]
		ms = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("empty message index")
	}
	return md, nil
}

// maxProtoIndex bounds the message-index list.
const maxProtoIndex = 64

// readIndex reads the Confluent message-index list: a zig-zag varint
// count then that many indexes; a count of 0 means [0].
func readIndex(b []byte) ([]int, []byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: truncated message-index list", ErrWireFormat)
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > maxProtoIndex {
		return nil, nil, fmt.Errorf("%w: message-index list of length %d", ErrWireFormat, n)
	}
	path := make([]int, n)
	for i := range path {
		x, k := binary.Varint(b)
		if k <= 0 || x < 0 || x > math.MaxInt32 {
			return nil, nil, fmt.Errorf("%w: invalid message index", ErrWireFormat)
		}
		path[i], b = int(x), b[k:]
	}
	return path, b, nil
}

func appendIndex(dst []byte, path []int) []byte {
	if len(path) == 1 && path[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(path)))
	for _, i := range path {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

func (c *protoCodec) Decode(ctx context.Context, _ string, b []byte) (any, error) {
	id, rest, err := splitWire(b)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: %w", err)
	}
	path, payload, err := readIndex(rest)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: %w", err)
	}
	fd, err := c.reg.schemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: %w", err)
	}
	md, err := messageAt(fd, path)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: schema id %d: %w", id, err)
	}
	msg := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(payload, msg); err != nil {
		return nil, fmt.Errorf("protobuf format: schema id %d, message %s: %w", id, md.FullName(), err)
	}
	return protoToValue(msg), nil
}

func (c *protoCodec) Encode(ctx context.Context, topic string, dst []byte, v any) ([]byte, error) {
	id, fd, err := c.reg.writerFor(ctx, topic, c.fullName)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: %w", err)
	}
	md, path, err := c.writerMessage(fd)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: schema id %d: %w", id, err)
	}
	msg := dynamicpb.NewMessage(md)
	if err := valueToProto(msg, v, ""); err != nil {
		return nil, fmt.Errorf("protobuf format: schema id %d, message %s: %w", id, md.FullName(), err)
	}
	dst = appendIndex(appendWire(dst, id), path)
	out, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, msg)
	if err != nil {
		return nil, fmt.Errorf("protobuf format: schema id %d, message %s: %w", id, md.FullName(), err)
	}
	return out, nil
}

// Identity is "": a writer looks its own schema up.
func (c *protoCodec) Identity() string { return "" }

const timestampName = "google.protobuf.Timestamp"

// protoToValue maps a message to an object: every field by its .proto
// name; an unset field with presence (message, optional, oneof member)
// is null, others hold their defaults.
func protoToValue(m protoreflect.Message) any {
	md := m.Descriptor()
	if md.FullName() == timestampName {
		f := md.Fields()
		return time.Unix(m.Get(f.ByName("seconds")).Int(), m.Get(f.ByName("nanos")).Int()).UTC()
	}
	out := make(map[string]any, md.Fields().Len())
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			a := make([]any, l.Len())
			for j := range l.Len() {
				a[j] = protoScalar(fd, l.Get(j))
			}
			out[name] = a
		case fd.IsMap():
			mm := map[string]any{}
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				mm[k.String()] = protoScalar(fd.MapValue(), v)
				return true
			})
			out[name] = mm
		case fd.HasPresence() && !m.Has(fd):
			out[name] = nil
		default:
			out[name] = protoScalar(fd, m.Get(fd))
		}
	}
	return out
}

func protoScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u > math.MaxInt64 {
			return json.Number(strconv.FormatUint(u, 10))
		}
		return int64(u)
	case protoreflect.FloatKind:
		f, _ := strconv.ParseFloat(strconv.FormatFloat(v.Float(), 'g', -1, 32), 64)
		return f
	case protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return slices.Clone(v.Bytes())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int64(v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoToValue(v.Message())
	}
	return nil
}

// valueToProto sets a message's fields from an object.
func valueToProto(m protoreflect.Message, v any, path string) error {
	md := m.Descriptor()
	if md.FullName() == timestampName {
		t, err := toTime(v, path)
		if err != nil {
			return err
		}
		f := md.Fields()
		m.Set(f.ByName("seconds"), protoreflect.ValueOfInt64(t.Unix()))
		m.Set(f.ByName("nanos"), protoreflect.ValueOfInt32(int32(t.Nanosecond())))
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fieldErr(path, "want an object (message %s), got %s", md.FullName(), aKind(v))
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		x := obj[k]
		fp := joinPath(path, k)
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		if fd == nil {
			return fieldErr(fp, "not a field of message %s", md.FullName())
		}
		if x == nil {
			continue // unset
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if set := m.WhichOneof(od); set != nil {
				return fieldErr(fp, "%s and %s are both set, but oneof %s holds one", set.Name(), fd.Name(), od.Name())
			}
		}
		switch {
		case fd.IsList():
			l, ok := x.([]any)
			if !ok {
				return fieldErr(fp, "want a list, got %s", aKind(x))
			}
			list := m.Mutable(fd).List()
			for i, item := range l {
				pv, err := protoValue(fd, list.NewElement, item, fmt.Sprintf("%s[%d]", fp, i))
				if err != nil {
					return err
				}
				list.Append(pv)
			}
		case fd.IsMap():
			mm, ok := x.(map[string]any)
			if !ok {
				return fieldErr(fp, "want an object, got %s", aKind(x))
			}
			pm := m.Mutable(fd).Map()
			for mk, item := range mm {
				key, err := protoMapKey(fd.MapKey(), mk, joinPath(fp, mk))
				if err != nil {
					return err
				}
				pv, err := protoValue(fd.MapValue(), pm.NewValue, item, joinPath(fp, mk))
				if err != nil {
					return err
				}
				pm.Set(key, pv)
			}
		default:
			pv, err := protoValue(fd, func() protoreflect.Value { return m.NewField(fd) }, x, fp)
			if err != nil {
				return err
			}
			m.Set(fd, pv)
		}
	}
	return nil
}

func toTime(v any, path string) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return time.Time{}, fieldErr(path, "%q is not an RFC 3339 time", x)
		}
		return t, nil
	}
	return time.Time{}, fieldErr(path, "want a time, got %s", aKind(v))
}

func protoMapKey(fd protoreflect.FieldDescriptor, k, path string) (protoreflect.MapKey, error) {
	var x any = k
	switch fd.Kind() {
	case protoreflect.StringKind:
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(k)
		if err != nil {
			return protoreflect.MapKey{}, fieldErr(path, "map key %q is not a boolean", k)
		}
		x = b
	default:
		x = json.Number(k)
	}
	pv, err := protoValue(fd, nil, x, path)
	if err != nil {
		return protoreflect.MapKey{}, err
	}
	return pv.MapKey(), nil
}

// protoValue converts a value for a field (a list element or a map
// value when fd is such a field's).
func protoValue(fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, v any, path string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, err := toBool(v, path)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		x, err := toInt64(v, path, "an int32")
		if err != nil {
			return protoreflect.Value{}, err
		}
		if x < math.MinInt32 || x > math.MaxInt32 {
			return protoreflect.Value{}, fieldErr(path, "%d is out of the int32 range", x)
		}
		return protoreflect.ValueOfInt32(int32(x)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		x, err := toInt64(v, path, "an int64")
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfInt64(x), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var u uint64
		if s, ok := v.(string); ok {
			if n, ok := numberString(s); ok {
				v = n
			}
		}
		if n, ok := v.(json.Number); ok {
			x, err := strconv.ParseUint(string(n), 10, 64)
			if err != nil {
				return protoreflect.Value{}, fieldErr(path, "%s is not an unsigned integer", n)
			}
			u = x
		} else {
			x, err := toInt64(v, path, "an unsigned integer")
			if err != nil {
				return protoreflect.Value{}, err
			}
			if x < 0 {
				return protoreflect.Value{}, fieldErr(path, "%d is negative (want an unsigned integer)", x)
			}
			u = uint64(x)
		}
		if (fd.Kind() == protoreflect.Uint32Kind || fd.Kind() == protoreflect.Fixed32Kind) && u > math.MaxUint32 {
			return protoreflect.Value{}, fieldErr(path, "%d is out of the uint32 range", u)
		}
		if fd.Kind() == protoreflect.Uint32Kind || fd.Kind() == protoreflect.Fixed32Kind {
			return protoreflect.ValueOfUint32(uint32(u)), nil
		}
		return protoreflect.ValueOfUint64(u), nil
	case protoreflect.FloatKind:
		f, err := toFloat(v, path, 24)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfFloat32(float32(f)), nil
	case protoreflect.DoubleKind:
		f, err := toFloat(v, path, 53)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfFloat64(f), nil
	case protoreflect.StringKind:
		switch x := v.(type) {
		case string:
			return protoreflect.ValueOfString(x), nil
		case []byte:
			if utf8.Valid(x) {
				return protoreflect.ValueOfString(string(x)), nil
			}
		}
		return protoreflect.Value{}, fieldErr(path, "want a string, got %s", aKind(v))
	case protoreflect.BytesKind:
		switch x := v.(type) {
		case []byte:
			return protoreflect.ValueOfBytes(x), nil
		case string:
			return protoreflect.ValueOfBytes([]byte(x)), nil
		}
		return protoreflect.Value{}, fieldErr(path, "want bytes, got %s", aKind(v))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if s, ok := v.(string); ok {
			ev := vals.ByName(protoreflect.Name(s))
			if ev == nil {
				names := make([]string, vals.Len())
				for i := range vals.Len() {
					names[i] = string(vals.Get(i).Name())
				}
				return protoreflect.Value{}, fieldErr(path, "%q is not a value of enum %s (%s)", s, fd.Enum().FullName(), strings.Join(names, ", "))
			}
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		x, err := toInt64(v, path, "an enum name or number")
		if err != nil {
			return protoreflect.Value{}, err
		}
		if x < math.MinInt32 || x > math.MaxInt32 {
			return protoreflect.Value{}, fieldErr(path, "enum number %d out of range", x)
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(x)), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		pv := newMsg()
		if err := valueToProto(pv.Message(), v, path); err != nil {
			return protoreflect.Value{}, err
		}
		return pv, nil
	}
	return protoreflect.Value{}, fieldErr(path, "unsupported Protobuf kind %s", fd.Kind())
}
