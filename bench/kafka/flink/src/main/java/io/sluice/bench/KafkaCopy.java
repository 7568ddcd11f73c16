package io.sluice.bench;

import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Flink contender of sluice's Kafka → Kafka benchmark: values copied as
 * bytes from --in to --out, KafkaSource (read_committed, from the earliest
 * offsets, bounded at the latest offsets at start) to KafkaSink
 * EXACTLY_ONCE, a checkpoint every --checkpoint-interval-ms, on a local
 * MiniCluster of --parallelism slots. The producer keeps Flink's and the
 * Kafka client's defaults (as a Flink user gets them). With --codec json
 * each value is parsed into a Map with Jackson and written again (the
 * JSON work of a job that reads its values); with --codec json-double
 * parsed into a tree, its field "amount" doubled, and written again (the
 * work of a job that reads one field and writes it back).
 */
public final class KafkaCopy {
    public static void main(String[] argv) throws Exception {
        Map<String, String> a = parse(argv);
        String brokers = need(a, "brokers");
        String in = need(a, "in");
        String out = need(a, "out");
        int p = Integer.parseInt(a.getOrDefault("parallelism", "1"));
        long interval = Long.parseLong(a.getOrDefault("checkpoint-interval-ms", "1000"));

        Configuration conf = new Configuration();
        String dir = a.get("checkpoint-dir");
        if (dir != null) {
            conf.set(ConfigOptions.key("execution.checkpointing.storage").stringType().noDefaultValue(), "filesystem");
            conf.set(ConfigOptions.key("execution.checkpointing.dir").stringType().noDefaultValue(), dir);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        env.enableCheckpointing(interval, CheckpointingMode.EXACTLY_ONCE);

        KafkaSource<byte[]> source = KafkaSource.<byte[]>builder()
                .setBootstrapServers(brokers)
                .setTopics(in)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setDeserializer(KafkaRecordDeserializationSchema.valueOnly(ByteArrayDeserializer.class))
                .setProperty("isolation.level", "read_committed")
                .setProperty("partition.discovery.interval.ms", "-1")
                .build();
        SerializationSchema<byte[]> identity = new Bytes();
        KafkaSink<byte[]> sink = KafkaSink.<byte[]>builder()
                .setBootstrapServers(brokers)
                .setRecordSerializer(KafkaRecordSerializationSchema.<byte[]>builder()
                        .setTopic(out)
                        .setValueSerializationSchema(identity)
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix("bench-flink-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis())
                .setProperty("transaction.timeout.ms", "600000")
                .build();
        DataStream<byte[]> values = env.fromSource(source, WatermarkStrategy.noWatermarks(), "in");
        String codec = a.getOrDefault("codec", "raw");
        switch (codec) {
            case "raw":
                break;
            case "json":
                values = values.map(new JsonRecode()).name("json");
                break;
            case "json-double":
                values = values.map(new JsonDouble()).name("json-double");
                break;
            default:
                throw new IllegalArgumentException("--codec: want raw, json or json-double, got " + codec);
        }
        values.sinkTo(sink);
        env.execute("sluice-bench-flink");
    }

    /** Parses a JSON object into a Map and writes it again. */
    static final class JsonRecode implements MapFunction<byte[], byte[]> {
        private transient ObjectMapper mapper;

        @Override
        public byte[] map(byte[] v) throws Exception {
            if (mapper == null) {
                mapper = new ObjectMapper();
            }
            return mapper.writeValueAsBytes(mapper.readValue(v, Map.class));
        }
    }

    /**
     * Reads a JSON object with Jackson (a tree: ObjectNode, members in
     * their order), doubles its integer field "amount" and writes it
     * again: the work of sluice's map {"amount": amount * 2, ...}.
     */
    static final class JsonDouble implements MapFunction<byte[], byte[]> {
        private transient ObjectMapper mapper;

        @Override
        public byte[] map(byte[] v) throws Exception {
            if (mapper == null) {
                mapper = new ObjectMapper();
            }
            ObjectNode o = (ObjectNode) mapper.readTree(v);
            o.put("amount", o.get("amount").longValue() * 2);
            return mapper.writeValueAsBytes(o);
        }
    }

    /** The value as it is (a class, not a lambda: Flink's lineage reads its type). */
    static final class Bytes implements SerializationSchema<byte[]> {
        @Override
        public byte[] serialize(byte[] v) {
            return v;
        }
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("usage: --brokers B --in T --out T [--codec raw|json|json-double] [--parallelism N] [--checkpoint-interval-ms MS] [--checkpoint-dir URI]; bad argument " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[++i]);
        }
        return m;
    }

    private static String need(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }
}
