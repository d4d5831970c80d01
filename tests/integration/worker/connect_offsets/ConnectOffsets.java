// Writes (or prints as hex) source offsets the way Kafka Connect does for the Java scylla-cdc-source-connector:
// partition and offset maps built as its SourceInfo builds them (Debezium's Collect.hashMapOf,
// i.e. java.util.HashMap, then putAll of the change id), serialized by Connect's JsonConverter
// with schemas.enable=false (key = [connector name, partition]), produced with the Java
// producer's default partitioner. Test-only reference for the bridge's offsets format.
//
//   java -cp <lib>/* ConnectOffsets.java print NAME KS TABLE VNODE GEN_MS WSTART WEND [STREAM TIME]
//   java -cp <lib>/* ConnectOffsets.java produce BOOTSTRAP TOPIC NAME KS TABLE VNODE GEN_MS WSTART WEND [STREAM TIME]
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.json.JsonConverter;

public class ConnectOffsets {
    public static void main(String[] args) throws Exception {
        boolean produce = args[0].equals("produce");
        int i = produce ? 3 : 1;
        String name = args[i], ks = args[i + 1], table = args[i + 2], vnode = args[i + 3], gen = args[i + 4];
        Map<String, String> partition = new HashMap<>();
        partition.put("keyspace_name", ks);
        partition.put("table_name", table);
        partition.put("vnode_id", vnode);
        partition.put("generation_start", gen);
        Map<String, String> offset = new HashMap<>();
        offset.put("window_start", args[i + 5]);
        offset.put("window_end", args[i + 6]);
        if (args.length > i + 8) {
            Map<String, String> change = new HashMap<>();
            change.put("change_id_stream_id", args[i + 7]);
            change.put("change_id_time", args[i + 8]);
            offset.putAll(change);
        }
        JsonConverter keys = new JsonConverter(), values = new JsonConverter();
        keys.configure(Map.of("schemas.enable", "false"), true);
        values.configure(Map.of("schemas.enable", "false"), false);
        byte[] key = keys.fromConnectData(name, null, Arrays.asList(name, partition));
        byte[] value = values.fromConnectData(name, null, offset);
        if (!produce) {  // hex: the exact bytes, whatever the terminal's charset
            System.out.println(hex(key));
            System.out.println(hex(value));
            return;
        }
        Properties config = new Properties();
        config.put("bootstrap.servers", args[1]);
        try (Producer<byte[], byte[]> producer =
                 new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            RecordMetadata written = producer.send(new ProducerRecord<>(args[2], key, value)).get();
            System.out.println(written.partition());
        }
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b));
        return out.toString();
    }
}
