"""The local stack: real Kafka (KRaft), Cassandra 5.0 and Apicurio Registry from Maven Central jars."""
