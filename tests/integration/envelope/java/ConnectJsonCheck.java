import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;

import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

/**
 * Reads base64 lines of {"schema":..,"payload":..} messages written by the bridge, has Kafka
 * Connect's own JsonConverter parse each one (which applies Connect's schema rules and checks the
 * payload against the schema), writes the result back with schemas.enable true and false, and
 * prints both as base64 ("OK <on> <off>"), or "ERROR <message>" for a message Connect rejects.
 */
public class ConnectJsonCheck {
    public static void main(String[] args) throws Exception {
        JsonConverter withSchemas = new JsonConverter();
        withSchemas.configure(Map.of("schemas.enable", "true"), false);
        JsonConverter withoutSchemas = new JsonConverter();
        withoutSchemas.configure(Map.of("schemas.enable", "false"), false);
        Base64.Encoder encoder = Base64.getEncoder();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                byte[] message = Base64.getDecoder().decode(line.trim());
                SchemaAndValue data = withSchemas.toConnectData("topic", message);
                byte[] on = withSchemas.fromConnectData("topic", data.schema(), data.value());
                byte[] off = withoutSchemas.fromConnectData("topic", data.schema(), data.value());
                System.out.println("OK " + encoder.encodeToString(on) + " " + encoder.encodeToString(off));
            } catch (Exception e) {
                System.out.println("ERROR " + String.valueOf(e).replace('\n', ' '));
            }
        }
    }
}
