"""Generated protobuf and gRPC code for package gateway.v1 (see gateway_cli/protogen.py)."""
