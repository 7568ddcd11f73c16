package engine

import (
	"fmt"
	"math"
	"reflect"
)

// HashOf returns a hash function for keys of a comparable type. The hash
// depends only on the key's value, not on the process: producers of a hash
// edge on different task hosts send a key to the same subtask. Strings,
// integer kinds, floats and booleans (named types of those kinds too) hash
// directly, and keys that compare equal hash equal (+0 and -0 too); other
// key types hash their fmt %#v form (slower: prefer a string or integer
// key on hot edges). A key that holds a pointer or a channel has no
// process-independent hash: its %#v form holds an address.
func HashOf[T any, K comparable](key func(T) K) func(T) uint64 {
	return func(v T) uint64 { return hashKey(key(v)) }
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return mix64(h)
}

// mix64 is splitmix64's finalizer: it spreads the bits of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashKey(k any) uint64 {
	switch k := k.(type) {
	case string:
		return fnvString(k)
	case int:
		return mix64(uint64(k))
	case int8:
		return mix64(uint64(k))
	case int16:
		return mix64(uint64(k))
	case int32:
		return mix64(uint64(k))
	case int64:
		return mix64(uint64(k))
	case uint:
		return mix64(uint64(k))
	case uint8:
		return mix64(uint64(k))
	case uint16:
		return mix64(uint64(k))
	case uint32:
		return mix64(uint64(k))
	case uint64:
		return mix64(k)
	case uintptr:
		return mix64(uint64(k))
	case float32:
		return hashFloat(float64(k))
	case float64:
		return hashFloat(k)
	case bool:
		return hashBool(k)
	}
	return hashKind(k)
}

// hashFloat hashes -0 as +0: they compare equal, so they are one key.
func hashFloat(f float64) uint64 {
	if f == 0 {
		f = 0
	}
	return mix64(math.Float64bits(f))
}

func hashBool(b bool) uint64 {
	if b {
		return mix64(1)
	}
	return mix64(0)
}

// hashKind hashes named types by their kind, as hashKey hashes the
// unnamed ones, and anything else by its %#v form.
func hashKind(k any) uint64 {
	v := reflect.ValueOf(k)
	switch v.Kind() {
	case reflect.String:
		return fnvString(v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return mix64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return mix64(v.Uint())
	case reflect.Float32, reflect.Float64:
		return hashFloat(v.Float())
	case reflect.Bool:
		return hashBool(v.Bool())
	}
	return fnvString(fmt.Sprintf("%#v", k))
}
