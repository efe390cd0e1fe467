"""The suite's gRPC services, one package each. They talk only through gateway.v1 protos."""
