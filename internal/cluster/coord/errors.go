package coord

import "errors"

var (
	// ErrNotLeader reports a write through a Leadership that its holder has
	// resigned, or an operation that needs leadership the caller does not
	// hold. ErrFenced also matches ErrNotLeader with errors.Is.
	ErrNotLeader = errors.New("coord: not the leader")

	// ErrFenced reports a write that the store refused because the
	// leadership term it was made under has ended (its leadership key no
	// longer exists with the term's creation revision). Nothing of the
	// refused write was applied. errors.Is(err, ErrNotLeader) is true for it.
	ErrFenced error = fencedError{}

	// ErrNoLeader reports that no node holds leadership at the moment.
	ErrNoLeader = errors.New("coord: no leader elected")

	// ErrMemberExists reports a Join with a node id that a live member of
	// another session already holds. A restarted node sees it until the old
	// process's lease expires (at most one lease TTL); it may retry.
	ErrMemberExists = errors.New("coord: a live member already has this node id")

	// ErrNotJoined reports a Campaign before Join.
	ErrNotJoined = errors.New("coord: campaign before join")

	// ErrSessionLost reports a call that needs the session's lease after
	// it ended (expired or revoked). The node must create a new Coordinator.
	ErrSessionLost = errors.New("coord: session lease ended")

	// ErrClosed reports a call on a closed Coordinator.
	ErrClosed = errors.New("coord: coordinator closed")

	// ErrUnavailable reports that the coordination store could not be
	// reached, or had no quorum, before the call's deadline. The error also
	// wraps the cause. A fenced write that fails with it may or may not have
	// been applied; reading the key tells.
	ErrUnavailable = errors.New("coord: coordination store unavailable")
)

type fencedError struct{}

func (fencedError) Error() string {
	return "coord: fenced: the leadership term of this write has ended"
}

// Is makes errors.Is(ErrFenced, ErrNotLeader) true.
func (fencedError) Is(target error) bool { return target == ErrNotLeader }
