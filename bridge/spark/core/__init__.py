"""What every Spark job shares: the session (`session`, `spark_log`, `executors`, `fatal`,
`progress`, `errors`) and reading and decoding the envelope topics (`kafka_ranges`, `decode`,
`shape`, `avro`, `cdc_format`, `smt_options`, `output_schema`, `record_flattener`)."""
