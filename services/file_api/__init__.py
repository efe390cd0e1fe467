"""File API service (gRPC :50051): reads and writes of the six identity files."""
