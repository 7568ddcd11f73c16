package registry

import (
	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func init() {
	MustRegisterSource(Source{
		Name:        "kafka",
		Description: "Reads JSON objects from Kafka topics, one split per partition, read_committed (connectors/kafka).",
		Options: []Option{
			{Name: "brokers", Type: Strings, Required: true, Description: "bootstrap brokers, host:port"},
			{Name: "topics", Type: Strings, Required: true, Description: "topics to read"},
			{Name: "start", Type: Enum, Values: []string{"earliest", "latest"}, Default: "earliest", Description: "where to start without a checkpoint"},
			{Name: "group", Type: String, Default: "", Description: "consumer group that gets the checkpointed offsets (monitoring only); empty = none"},
			{Name: "bounded", Type: Bool, Default: false, Description: "stop at the offsets that are latest when the job starts"},
		},
		Build: func(c BuildContext) (stream.DataStream[Record], error) {
			start := kafka.Earliest()
			if c.Options.String("start") == "latest" {
				start = kafka.Latest()
			}
			opts := []kafka.SourceOption{kafka.Topics(c.Options.Strings("topics")...), kafka.StartingOffsets(start),
				kafka.SourceLogger(c.Logger)}
			if g := c.Options.String("group"); g != "" {
				opts = append(opts, kafka.GroupID(g))
			}
			if c.Options.Bool("bounded") {
				opts = append(opts, kafka.Bounded(kafka.Latest()))
			}
			src, err := kafka.NewSource(c.Options.Strings("brokers"), kafka.JSONDeserializer[Record](), opts...)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			return stream.FromSource(c.Env, src, watermark.None[Record](), c.Name, stream.UID(c.UID)), nil
		},
	})

	MustRegisterSink(Sink{
		Name:        "kafka",
		Description: "Writes records as JSON to a Kafka topic; exactly-once with one transaction per checkpoint per subtask (connectors/kafka).",
		ExactlyOnce: true,
		Options: []Option{
			{Name: "brokers", Type: Strings, Required: true, Description: "bootstrap brokers, host:port"},
			{Name: "topic", Type: String, Required: true, Description: "topic to write"},
			{Name: "transactional-id-prefix", Type: String, Default: "",
				Description: "prefix of the transactional ids (exactly-once); empty = sluice-<job id>-<sink name>, unique per job and stable across restores; a prefix set here must be unique among live jobs (a second job on it refuses to start)"},
		},
		Build: func(c BuildContext, in stream.DataStream[Record]) error {
			g := kafka.AtLeastOnce
			if c.Delivery == ExactlyOnce {
				g = kafka.ExactlyOnce
			}
			opts := []kafka.SinkOption{kafka.DefaultTopic(c.Options.String("topic")), kafka.DeliveryGuarantee(g),
				kafka.SinkLogger(c.Logger)}
			if prefix := c.Options.String("transactional-id-prefix"); prefix != "" {
				opts = append(opts, kafka.TransactionalIDPrefix(prefix))
			}
			s, err := kafka.NewSink(c.Options.Strings("brokers"), kafka.JSONSerializer[Record](), opts...)
			if err != nil {
				return err
			}
			stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
			return nil
		},
	})
}
