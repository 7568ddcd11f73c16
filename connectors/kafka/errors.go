package kafka

import "errors"

// Sentinel errors; the errors returned wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every configuration error; the message
	// names the option and what is allowed.
	ErrInvalidConfig = errors.New("kafka: invalid configuration")
	// ErrMalformedRecord is wrapped by the error of a record the
	// deserializer rejected; the message names topic, partition and offset.
	ErrMalformedRecord = errors.New("kafka: malformed record")
	// ErrNoFreeTransactionSlot is returned by an exactly-once writer whose
	// every transactional id still holds a prepared, uncommitted
	// transaction (checkpoints are not completing); the job restarts.
	ErrNoFreeTransactionSlot = errors.New("kafka: no free transactional id slot")
	// ErrTopicNotFound is wrapped when a configured topic does not exist.
	ErrTopicNotFound = errors.New("kafka: topic not found")
	// ErrTransactionTimeout is wrapped when the transaction timeout exceeds
	// the broker's transaction.max.timeout.ms.
	ErrTransactionTimeout = errors.New("kafka: transaction timeout too large")
)
