"""OTLP intake: decoding export bodies and the gRPC receiver."""
