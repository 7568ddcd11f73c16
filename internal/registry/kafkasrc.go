package registry

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
)

// The Kafka source's start and stop positions, topic selection, discovery
// and isolation, with Flink SQL's option names (docs/cli.md maps them).
// The old names start, bounded and group stay as aliases: setting an alias
// and its new name together is a configuration error.

// Startup modes (scan.startup.mode).
const (
	startEarliest  = "earliest-offset"
	startLatest    = "latest-offset"
	startGroup     = "group-offsets"
	startTimestamp = "timestamp"
	startSpecific  = "specific-offsets"
)

// Bounded modes (scan.bounded.mode).
const (
	boundUnbounded = "unbounded"
	boundLatest    = "latest-offset"
	boundTimestamp = "timestamp"
	boundSpecific  = "specific-offsets"
)

// kafkaSourceStartOptions are the Kafka source's options of this file, in
// the order `sluice connectors` shows them.
var kafkaSourceStartOptions = []Option{
	{Name: "topics", Type: Strings, Description: "topics to read (this or topic-pattern is required)"},
	{Name: "topic-pattern", Type: String, Check: checkRegexp,
		Description: "regular expression (Go syntax, matched against the whole name): read every topic whose name matches, found again at each partition discovery; instead of topics"},
	{Name: "scan.startup.mode", Type: Enum, Values: []string{startEarliest, startLatest, startGroup, startTimestamp, startSpecific},
		Description: "where to start without a checkpoint (default earliest-offset): earliest-offset, latest-offset, group-offsets (the committed offsets of properties.group.id; partitions without one per properties.auto.offset.reset), timestamp (scan.startup.timestamp-millis), specific-offsets (scan.startup.specific-offsets). A restore (--from) always continues at the checkpoint's offsets"},
	{Name: "scan.startup.timestamp-millis", Type: Int, Check: AtLeast(0),
		Description: "with scan.startup.mode: timestamp, each partition starts at its first record whose timestamp is at or after this (milliseconds since the epoch), or at its end"},
	{Name: "scan.startup.specific-offsets", Type: String, Check: checkSpecificOffsets,
		Description: "with scan.startup.mode: specific-offsets, \"partition:0,offset:42;partition:1,offset:300\" (every topic) or with a topic qualifier \"topic:t,partition:0,offset:42\"; partitions not listed per properties.auto.offset.reset"},
	{Name: "properties.auto.offset.reset", Type: Enum, Values: []string{"earliest", "latest", "none"}, Default: "earliest",
		Description: "start of a partition that has no group offset (group-offsets) or no listed offset (specific-offsets): earliest, latest, or none = the job fails at once (no restarts) naming the partitions"},
	{Name: "scan.bounded.mode", Type: Enum, Values: []string{boundUnbounded, boundLatest, boundTimestamp, boundSpecific},
		Description: "where the job ends (default unbounded): unbounded, latest-offset (the offsets that are latest when the job first starts), timestamp (scan.bounded.timestamp-millis), specific-offsets (scan.bounded.specific-offsets); a bounded job takes a final checkpoint and exits 0"},
	{Name: "scan.bounded.timestamp-millis", Type: Int, Check: AtLeast(0),
		Description: "with scan.bounded.mode: timestamp, each partition ends before its first record whose timestamp is at or after this (milliseconds since the epoch)"},
	{Name: "scan.bounded.specific-offsets", Type: String, Check: checkSpecificOffsets,
		Description: "with scan.bounded.mode: specific-offsets, the offset (exclusive) where each partition ends, in scan.startup.specific-offsets' format; partitions not listed end at latest-offset"},
	{Name: "scan.topic-partition-discovery.interval", Type: Duration, Default: 30 * time.Second, Check: AtLeast(0),
		Description: "how often topics (topic-pattern) and partitions are discovered in an unbounded job; new ones start at their earliest offset; 0 disables it"},
	{Name: "properties.isolation.level", Type: Enum, Values: []string{"read_committed", "read_uncommitted"}, Default: "read_committed",
		Description: "read_committed reads only committed transactions' records; read_uncommitted also those of open and aborted ones"},
	{Name: "properties.group.id", Type: String,
		Description: "consumer group: its committed offsets are where group-offsets starts, and the source commits each completed checkpoint's offsets to it (default: none, nothing committed)"},
	{Name: "start", Type: Enum, Values: []string{"earliest", "latest"},
		Description: "deprecated alias: earliest = scan.startup.mode: earliest-offset, latest = latest-offset"},
	{Name: "bounded", Type: Bool, Description: "deprecated alias: true = scan.bounded.mode: latest-offset, false = unbounded"},
	{Name: "group", Type: String, Description: "deprecated alias of properties.group.id"},
	kafkaPropsOption(propConsumer), // properties.*: kafkaprops.go
}

func optErr(name, format string, a ...any) error {
	return &OptionError{Option: name, Err: fmt.Errorf(format, a...)}
}

func checkRegexp(v any) error {
	s, _ := v.(string)
	if s == "" {
		return errors.New("must not be empty")
	}
	if _, err := regexp.Compile(s); err != nil {
		// Not the error itself: it quotes the expression, which may
		// come from the environment.
		if se, ok := errors.AsType[*syntax.Error](err); ok {
			return fmt.Errorf("not a regular expression: %s", se.Code)
		}
		return errors.New("not a regular expression")
	}
	return nil
}

func checkSpecificOffsets(v any) error {
	s, _ := v.(string)
	_, err := ParseSpecificOffsets(s)
	return err
}

// ParseSpecificOffsets parses Flink's specific-offsets format: entries
// separated by ";", each "partition:<p>,offset:<o>", optionally with
// "topic:<name>," first. Entries without a topic are stored under the
// topic "" (every topic not named; kafka.AtOffsets). Its errors name the
// entry and item, never the text (it may come from the environment).
func ParseSpecificOffsets(s string) (map[string]map[int32]int64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New(`empty; want "partition:0,offset:42;partition:1,offset:300"`)
	}
	out := map[string]map[int32]int64{}
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			if i == strings.Count(s, ";") && i > 0 {
				continue // a trailing ";"
			}
			return nil, fmt.Errorf("entry %d is empty", i+1)
		}
		var topic string
		var part, off int64
		var haveTopic, havePart, haveOff bool
		for j, kv := range strings.Split(entry, ",") {
			k, val, ok := strings.Cut(kv, ":")
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			if !ok || val == "" {
				return nil, fmt.Errorf("entry %d: item %d is not key:value", i+1, j+1)
			}
			var err error
			switch k {
			case "topic":
				if haveTopic {
					return nil, fmt.Errorf("entry %d: topic given twice", i+1)
				}
				topic, haveTopic = val, true
			case "partition":
				if havePart {
					return nil, fmt.Errorf("entry %d: partition given twice", i+1)
				}
				part, err = strconv.ParseInt(val, 10, 32)
				if err != nil || part < 0 {
					return nil, fmt.Errorf("entry %d: the partition is not a number from 0 to 2147483647", i+1)
				}
				havePart = true
			case "offset":
				if haveOff {
					return nil, fmt.Errorf("entry %d: offset given twice", i+1)
				}
				off, err = strconv.ParseInt(val, 10, 64)
				if err != nil || off < 0 {
					return nil, fmt.Errorf("entry %d: the offset is not a number from 0", i+1)
				}
				haveOff = true
			default:
				return nil, fmt.Errorf("entry %d: item %d has an unknown key (allowed: topic, partition, offset)", i+1, j+1)
			}
		}
		if !havePart || !haveOff {
			return nil, fmt.Errorf("entry %d: want partition:<p>,offset:<o>", i+1)
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		if _, dup := out[topic][int32(part)]; dup {
			name := "every topic"
			if topic != "" {
				name = "its topic"
			}
			return nil, fmt.Errorf("entry %d: the partition of %s is given twice", i+1, name)
		}
		out[topic][int32(part)] = off
	}
	return out, nil
}

// validateKafkaSource checks the rules across the source's options; its
// errors are *OptionError naming the key to report.
func validateKafkaSource(o Options) error {
	topics := o.Has("topics")
	switch {
	case topics && o.Has("topic-pattern"):
		return optErr("topic-pattern", "set either topics or topic-pattern, not both")
	case !topics && !o.Has("topic-pattern"):
		return optErr("topics", "missing: set topics (a list) or topic-pattern (a regular expression)")
	case topics && len(o.Strings("topics")) == 0:
		return optErr("topics", "empty list: name at least one topic")
	}
	for _, a := range [][2]string{{"start", "scan.startup.mode"}, {"bounded", "scan.bounded.mode"}, {"group", "properties.group.id"}} {
		if o.Has(a[0]) && o.Has(a[1]) {
			return optErr(a[0], "%s is the deprecated alias of %s; set only %s", a[0], a[1], a[1])
		}
	}
	mode := startupMode(o)
	modeKey := "scan.startup.mode"
	if o.Has("start") {
		modeKey = "start"
	}
	switch {
	case mode == startTimestamp && !o.Has("scan.startup.timestamp-millis"):
		return optErr(modeKey, "timestamp needs scan.startup.timestamp-millis")
	case mode != startTimestamp && o.Has("scan.startup.timestamp-millis"):
		return optErr("scan.startup.timestamp-millis", "is used only with scan.startup.mode: timestamp (the mode is %s)", mode)
	case mode == startSpecific && !o.Has("scan.startup.specific-offsets"):
		return optErr(modeKey, "specific-offsets needs scan.startup.specific-offsets")
	case mode != startSpecific && o.Has("scan.startup.specific-offsets"):
		return optErr("scan.startup.specific-offsets", "is used only with scan.startup.mode: specific-offsets (the mode is %s)", mode)
	case mode == startGroup && groupID(o) == "":
		return optErr(modeKey, "group-offsets needs properties.group.id (the consumer group whose offsets to start at)")
	}
	bmode := boundedMode(o)
	bkey := "scan.bounded.mode"
	switch {
	case bmode == boundTimestamp && !o.Has("scan.bounded.timestamp-millis"):
		return optErr(bkey, "timestamp needs scan.bounded.timestamp-millis")
	case bmode != boundTimestamp && o.Has("scan.bounded.timestamp-millis"):
		return optErr("scan.bounded.timestamp-millis", "is used only with scan.bounded.mode: timestamp (the mode is %s)", bmode)
	case bmode == boundSpecific && !o.Has("scan.bounded.specific-offsets"):
		return optErr(bkey, "specific-offsets needs scan.bounded.specific-offsets")
	case bmode != boundSpecific && o.Has("scan.bounded.specific-offsets"):
		return optErr("scan.bounded.specific-offsets", "is used only with scan.bounded.mode: specific-offsets (the mode is %s)", bmode)
	}
	if topics {
		for _, key := range []string{"scan.startup.specific-offsets", "scan.bounded.specific-offsets"} {
			if !o.Has(key) {
				continue
			}
			m, err := ParseSpecificOffsets(o.String(key))
			if err != nil {
				return optErr(key, "%v", err)
			}
			for t := range m {
				if t != "" && !slices.Contains(o.Strings("topics"), t) {
					if o.FromEnvironment(key) || o.FromEnvironment("topics") {
						return optErr(key, "names a topic that is not among topics")
					}
					return optErr(key, "topic %q is not among topics", t)
				}
			}
		}
	}
	return nil
}

func startupMode(o Options) string {
	switch o.String("start") {
	case "earliest":
		return startEarliest
	case "latest":
		return startLatest
	}
	if m := o.String("scan.startup.mode"); m != "" {
		return m
	}
	return startEarliest
}

func boundedMode(o Options) string {
	if o.Has("bounded") {
		if o.Bool("bounded") {
			return boundLatest
		}
		return boundUnbounded
	}
	if m := o.String("scan.bounded.mode"); m != "" {
		return m
	}
	return boundUnbounded
}

func groupID(o Options) string {
	if g := o.String("properties.group.id"); g != "" {
		return g
	}
	return o.String("group")
}

// kafkaSourceStart turns the options of this file into library options
// (o passed validateKafkaSource).
func kafkaSourceStart(o Options) ([]kafka.SourceOption, error) {
	var opts []kafka.SourceOption
	if o.Has("topic-pattern") {
		re, err := regexp.Compile("^(?:" + o.String("topic-pattern") + ")$")
		if err != nil {
			return nil, fmt.Errorf("topic-pattern: %w", err)
		}
		opts = append(opts, kafka.TopicPattern(re))
	} else {
		opts = append(opts, kafka.Topics(o.Strings("topics")...))
	}
	reset := kafka.Earliest()
	switch o.String("properties.auto.offset.reset") {
	case "latest":
		reset = kafka.Latest()
	case "none":
		reset = kafka.NoReset()
	}
	var start kafka.OffsetSpec
	switch startupMode(o) {
	case startLatest:
		start = kafka.Latest()
	case startGroup:
		start = kafka.Committed(reset)
	case startTimestamp:
		start = kafka.AtTimestamp(o.Int("scan.startup.timestamp-millis"))
	case startSpecific:
		m, err := ParseSpecificOffsets(o.String("scan.startup.specific-offsets"))
		if err != nil {
			return nil, fmt.Errorf("scan.startup.specific-offsets: %w", err)
		}
		start = kafka.AtOffsets(m, reset)
	default:
		start = kafka.Earliest()
	}
	opts = append(opts, kafka.StartingOffsets(start))
	switch boundedMode(o) {
	case boundLatest:
		opts = append(opts, kafka.Bounded(kafka.Latest()))
	case boundTimestamp:
		opts = append(opts, kafka.Bounded(kafka.AtTimestamp(o.Int("scan.bounded.timestamp-millis"))))
	case boundSpecific:
		m, err := ParseSpecificOffsets(o.String("scan.bounded.specific-offsets"))
		if err != nil {
			return nil, fmt.Errorf("scan.bounded.specific-offsets: %w", err)
		}
		opts = append(opts, kafka.Bounded(kafka.AtOffsets(m, kafka.Latest())))
	}
	if g := groupID(o); g != "" {
		opts = append(opts, kafka.GroupID(g))
	}
	opts = append(opts, kafka.PartitionDiscovery(o.Duration("scan.topic-partition-discovery.interval")))
	if o.String("properties.isolation.level") == "read_uncommitted" {
		opts = append(opts, kafka.ReadUncommitted())
	}
	return opts, nil
}
