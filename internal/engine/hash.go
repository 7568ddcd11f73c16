package engine

import (
	"fmt"
	"math"
)

// HashOf returns a hash function for keys of a comparable type. The hash
// depends only on the key's value, not on the process: producers of a hash
// edge on different task hosts send a key to the same subtask. Strings,
// byte-sized and integer kinds, floats and booleans hash directly; other
// key types hash their fmt %#v form (slower: prefer a string or integer
// key on hot edges).
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
		return mix64(math.Float64bits(float64(k)))
	case float64:
		return mix64(math.Float64bits(k))
	case bool:
		if k {
			return mix64(1)
		}
		return mix64(0)
	}
	return fnvString(fmt.Sprintf("%#v", k))
}
