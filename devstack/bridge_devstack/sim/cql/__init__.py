"""The CQL subset the emulator parses: tokenizer, syntax tree, parser, literal values."""
