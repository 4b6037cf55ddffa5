"""A KEDA-like client of gpuscale's external scaler, written independently
of the Rust code: stubs are generated from adapter/proto/externalscaler.proto
with grpcio-tools at start, and the calls are made as KEDA makes them.

    keda_client.py --proto DIR --target HOST:PORT [--ca F [--cert F --key F]] CMD ARG

CMD is one of
  calls JSON   run a JSON list of calls {"rpc", "namespace", "name",
               "metadata", "metricName"}; print a JSON list of results
  poll JSON    as KEDA's poll loop: GetMetricSpec, then per round GetMetrics
               and IsActive (--rounds, --interval); one JSON line per round
  stream JSON  hold StreamIsActive open (external-push); one JSON line per
               message, flushed, until the stream ends
Each result is {"ok": {...}} or {"code": "UNAVAILABLE", "details": "..."}.
"""

import argparse
import importlib
import json
import sys
import tempfile
import time

import grpc
from grpc_tools import protoc
from google.protobuf import json_format


def stubs(proto_dir):
    out = tempfile.mkdtemp(prefix="keda-stubs-")
    rc = protoc.main([
        "protoc", f"-I{proto_dir}", f"--python_out={out}",
        f"--grpc_python_out={out}", f"{proto_dir}/externalscaler.proto",
    ])
    if rc != 0:
        sys.exit(f"protoc failed: {rc}")
    sys.path.insert(0, out)
    return (importlib.import_module("externalscaler_pb2"),
            importlib.import_module("externalscaler_pb2_grpc"))


def channel(args):
    if not args.ca:
        return grpc.insecure_channel(args.target)
    read = lambda p: open(p, "rb").read() if p else None
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca),
        private_key=read(args.key),
        certificate_chain=read(args.cert))
    return grpc.secure_channel(
        args.target, creds,
        options=[("grpc.ssl_target_name_override", "localhost")])


def result(fn):
    try:
        msg = fn()
        return {"ok": json_format.MessageToDict(
            msg, always_print_fields_with_no_presence=True)}
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details()}


def ref(pb, spec):
    return pb.ScaledObjectRef(
        name=spec.get("name", "chat"),
        namespace=spec.get("namespace", "inference"),
        scalerMetadata=spec.get("metadata", {}))


def call(pb, stub, spec, timeout):
    r = ref(pb, spec)
    rpc = spec["rpc"]
    if rpc == "GetMetrics":
        req = pb.GetMetricsRequest(scaledObjectRef=r,
                                   metricName=spec.get("metricName", ""))
        return result(lambda: stub.GetMetrics(req, timeout=timeout))
    if rpc == "StreamMetricSpec":
        return result(lambda: next(stub.StreamMetricSpec(r, timeout=timeout)))
    return result(lambda: getattr(stub, rpc)(r, timeout=timeout))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1)
    ap.add_argument("cmd", choices=["calls", "poll", "stream"])
    ap.add_argument("arg")
    args = ap.parse_args()
    pb, pb_grpc = stubs(args.proto)
    stub = pb_grpc.ExternalScalerStub(channel(args))
    spec = json.loads(args.arg)
    if args.cmd == "calls":
        print(json.dumps([call(pb, stub, s, args.timeout) for s in spec]))
    elif args.cmd == "poll":
        spec_answer = call(pb, stub, dict(spec, rpc="GetMetricSpec"), args.timeout)
        name = spec_answer.get("ok", {}).get("metricSpecs", [{}])[0].get("metricName", "")
        for _ in range(args.rounds):
            print(json.dumps({
                "spec": spec_answer,
                "metrics": call(pb, stub, dict(spec, rpc="GetMetrics", metricName=name), args.timeout),
                "active": call(pb, stub, dict(spec, rpc="IsActive"), args.timeout),
            }), flush=True)
            time.sleep(args.interval)
    else:
        print(json.dumps({"opened": True}), flush=True)
        try:
            for msg in stub.StreamIsActive(ref(pb, spec)):
                print(json.dumps({"result": msg.result}), flush=True)
        except grpc.RpcError as e:
            print(json.dumps({"code": e.code().name, "details": e.details()}), flush=True)


if __name__ == "__main__":
    main()
