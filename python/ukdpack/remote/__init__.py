"""Remote execution of compiles on a build farm through the Remote Execution API v2
(REAPI). ``protos`` holds the vendored official .proto files and the modules
scripts/gen_reapi_protos.py generates from them."""
