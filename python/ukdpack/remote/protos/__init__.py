"""The REAPI v2 protos (bazelbuild/remote-apis) with the googleapis files they import
and ByteStream, as .proto sources and generated modules (scripts/gen_reapi_protos.py;
PROVENANCE.md says where each file comes from). Generated: not edited by hand."""
