"""The REST shim (HTTP :10850): transcodes REST to gRPC from the protos' http annotations."""
