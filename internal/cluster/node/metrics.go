package node

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// Metrics are the metrics of one node's loop: its term and role, the
// leaders it saw, the elections it won, how its terms ended, and the
// latency and failures of its checkpoint publishes. Run updates them
// (Config.Metrics), Storage too (through Term.Metrics); WritePrometheus
// exports them and Status summarizes them. Safe for concurrent use; a nil
// *Metrics records nothing.
type Metrics struct {
	node string

	mu            sync.Mutex
	role          string // RoleJoining, RoleStandby or RoleLeader
	term          int64  // this node's term while it leads, else 0
	leader        string // the leader this node knows of ("" none)
	leaderTerm    int64
	since         time.Time // when role last changed
	leaderChanges int64     // a different leader (or term) observed
	electionsWon  int64
	termsLost     map[string]int64 // by cause
	sessionLosses int64
	pauses        int64
	published     int64
	publishFails  map[string]int64 // by reason
	buckets       []int64          // publish latency histogram, cumulative at export
	latencySum    float64
}

// Roles of a node, as Status and the HTTP endpoint report them.
const (
	RoleJoining = "joining" // no session, or not yet campaigning
	RoleStandby = "standby" // campaigning; another node leads (or none yet)
	RoleLeader  = "leader"  // leads and runs the job
)

// Causes of an ended term (the cause label of
// sluice_node_leadership_lost_total).
const (
	LostFenced  = "fenced"  // a fenced write was refused
	LostSession = "session" // the session (lease) ended
	LostPause   = "pause"   // the process was paused past PauseLimit
	LostOther   = "other"   // the leadership ended otherwise (resigned, a lost term found by a rewrite)
)

// publishBuckets are the upper bounds, in seconds, of the publish latency
// histogram.
var publishBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics returns the metrics of node id, role joining.
func NewMetrics(id string) *Metrics {
	return &Metrics{node: id, role: RoleJoining, since: time.Now(), termsLost: map[string]int64{},
		publishFails: map[string]int64{}, buckets: make([]int64, len(publishBuckets)+1)}
}

func (m *Metrics) setRole(r string) {
	if m.role != r {
		m.role, m.since = r, time.Now()
	}
}

// joined records a session joined: the node stands by (it campaigns next).
func (m *Metrics) joined() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setRole(RoleStandby)
}

// sessionLost records a session that ended under the node.
func (m *Metrics) sessionLost() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessionLosses++
	m.setRole(RoleJoining)
}

// leaderSeen records the leader the node observes while standing by.
func (m *Metrics) leaderSeen(id string, term int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observe(id, term)
}

func (m *Metrics) observe(id string, term int64) {
	if id == m.leader && term == m.leaderTerm {
		return
	}
	if m.leader != "" || m.leaderTerm != 0 {
		m.leaderChanges++
	}
	m.leader, m.leaderTerm = id, term
}

// elected records an election won for term.
func (m *Metrics) elected(term int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.electionsWon++
	m.term = term
	m.observe(m.node, term)
	m.setRole(RoleLeader)
}

// termEnded records the end of this node's term; lost with a cause when
// it ended by losing the leadership.
func (m *Metrics) termEnded(lostCause string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if lostCause != "" {
		m.termsLost[lostCause]++
	}
	m.term = 0
	if m.leader == m.node {
		m.leader = "" // the next leader is not known yet
	}
	m.setRole(RoleStandby)
}

// pauseDetected records a pause of the process past PauseLimit.
func (m *Metrics) pauseDetected() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pauses++
}

// publishDone records one publish attempt of a checkpoint pointer that
// took d and ended with err.
func (m *Metrics) publishDone(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.publishFails[publishFailReason(err)]++
		return
	}
	m.published++
	s := d.Seconds()
	m.latencySum += s
	i := 0
	for i < len(publishBuckets) && s > publishBuckets[i] {
		i++
	}
	m.buckets[i]++
}

// publishFailReason is the reason label of a failed publish.
func publishFailReason(err error) string {
	switch {
	case errors.Is(err, coord.ErrFenced), errors.Is(err, coord.ErrNotLeader):
		return "fenced"
	case errors.Is(err, coord.ErrUnavailable):
		return "unavailable"
	default:
		return "other"
	}
}

// Status is a node's view of the cluster, as GET /status reports it.
type Status struct {
	Node string `json:"node"`
	// Role is RoleJoining, RoleStandby or RoleLeader.
	Role  string    `json:"role"`
	Since time.Time `json:"since"`
	// Term is this node's term while it leads (0 otherwise).
	Term int64 `json:"term,omitempty"`
	// Leader is the node that leads as far as this node knows ("" when
	// none is known), LeaderTerm its term.
	Leader        string           `json:"leader,omitempty"`
	LeaderTerm    int64            `json:"leader_term,omitempty"`
	ElectionsWon  int64            `json:"elections_won"`
	LeaderChanges int64            `json:"leader_changes"`
	TermsLost     map[string]int64 `json:"terms_lost,omitempty"`
	SessionLosses int64            `json:"session_losses"`
	Pauses        int64            `json:"pauses_detected"`
	Published     int64            `json:"checkpoints_published"`
	PublishFails  map[string]int64 `json:"publish_failures,omitempty"`
}

// Status returns the node's current status.
func (m *Metrics) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Node: m.node, Role: m.role, Since: m.since, Term: m.term, Leader: m.leader, LeaderTerm: m.leaderTerm,
		ElectionsWon: m.electionsWon, LeaderChanges: m.leaderChanges, SessionLosses: m.sessionLosses, Pauses: m.pauses,
		Published: m.published}
	if len(m.termsLost) > 0 {
		st.TermsLost = make(map[string]int64, len(m.termsLost))
		for k, v := range m.termsLost {
			st.TermsLost[k] = v
		}
	}
	if len(m.publishFails) > 0 {
		st.PublishFails = make(map[string]int64, len(m.publishFails))
		for k, v := range m.publishFails {
			st.PublishFails[k] = v
		}
	}
	return st
}

// WritePrometheus writes the metrics in the Prometheus text format
// (version 0.0.4), every sample labelled node="<id>":
//
//	sluice_node_is_leader                         gauge   1 while this node leads
//	sluice_node_term                              gauge   this node's term while it leads, else 0
//	sluice_node_leader_term                       gauge   the term of the leader this node knows (0: none)
//	sluice_node_leader_changes_total              counter a different leader or term observed (failovers)
//	sluice_node_elections_won_total               counter
//	sluice_node_leadership_lost_total{cause}      counter terms ended by fenced, session, pause, other
//	sluice_node_session_losses_total              counter sessions (leases) that ended under the node
//	sluice_node_pauses_detected_total             counter process pauses longer than PauseLimit
//	sluice_node_checkpoint_publish_seconds        histogram latency of successful pointer publishes
//	sluice_node_checkpoint_publish_failures_total{reason} counter failed attempts: fenced, unavailable, other
func (m *Metrics) WritePrometheus(w io.Writer) error {
	st := m.Status()
	m.mu.Lock()
	buckets := append([]int64(nil), m.buckets...)
	sum := m.latencySum
	m.mu.Unlock()
	var b strings.Builder
	lbl := `node="` + escapeLabel(st.Node) + `"`
	one := func(name, typ, help string, v int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %d\n", name, help, name, typ, name, lbl, v)
	}
	leader := int64(0)
	if st.Role == RoleLeader {
		leader = 1
	}
	one("sluice_node_is_leader", "gauge", "1 while this node leads the cluster and runs the job.", leader)
	one("sluice_node_term", "gauge", "This node's term (its election key's create revision) while it leads, else 0.", st.Term)
	one("sluice_node_leader_term", "gauge", "The term of the leader this node knows of (0: none known).", st.LeaderTerm)
	one("sluice_node_leader_changes_total", "counter", "Times this node saw a different leader or term (failovers).", st.LeaderChanges)
	one("sluice_node_elections_won_total", "counter", "Elections this node won.", st.ElectionsWon)
	fmt.Fprintf(&b, "# HELP sluice_node_leadership_lost_total Terms of this node that ended by losing the leadership, by cause.\n# TYPE sluice_node_leadership_lost_total counter\n")
	for _, c := range []string{LostFenced, LostSession, LostPause, LostOther} {
		fmt.Fprintf(&b, "sluice_node_leadership_lost_total{cause=%q,%s} %d\n", c, lbl, st.TermsLost[c])
	}
	one("sluice_node_session_losses_total", "counter", "Coordination sessions (etcd leases) that ended under this node.", st.SessionLosses)
	one("sluice_node_pauses_detected_total", "counter", "Pauses of this process (SIGSTOP, stalls) longer than the pause limit.", st.Pauses)
	const h = "sluice_node_checkpoint_publish_seconds"
	fmt.Fprintf(&b, "# HELP %s Latency of successful checkpoint pointer publishes (the leader's fenced write).\n# TYPE %s histogram\n", h, h)
	var cum int64
	for i, le := range publishBuckets {
		cum += buckets[i]
		fmt.Fprintf(&b, "%s_bucket{%s,le=%q} %d\n", h, lbl, strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	cum += buckets[len(publishBuckets)]
	fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %s\n%s_count{%s} %d\n", h, lbl, cum, h, lbl, strconv.FormatFloat(sum, 'g', -1, 64), h, lbl, cum)
	fmt.Fprintf(&b, "# HELP sluice_node_checkpoint_publish_failures_total Failed attempts to publish a checkpoint pointer, by reason.\n# TYPE sluice_node_checkpoint_publish_failures_total counter\n")
	for _, r := range []string{"fenced", "unavailable", "other"} {
		fmt.Fprintf(&b, "sluice_node_checkpoint_publish_failures_total{%s,reason=%q} %d\n", lbl, r, st.PublishFails[r])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
