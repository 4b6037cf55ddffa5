#!/usr/bin/env bash
# A busy simulated node: PODS pods (default 110, the kubelet's default
# maximum) time-slicing GPUS GPUs (default 8), one GPU process per pod.
# Pod p holds replica p/GPUS of GPU p%GPUS (or, on an odd GPU with
# CLAIMS=1, a DRA claim of that GPU with its own share_id) and runs pid 10000+p.
#   GPUS=8 PODS=110 CLAIMS=0 bench/busy-scenario.sh > busy.yaml
set -euo pipefail
GPUS=${GPUS:-8}
PODS=${PODS:-110}
CLAIMS=${CLAIMS:-0}
echo "node: busy-node"
echo "gpus:"
for ((g = 0; g < GPUS; g++)); do
  printf '  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-%08x-0000-4000-8000-00000000abcd\n' "$g"
  # bus 0x10 + g, wrapping to the next device number past bus 0xff
  printf '    pci_bus_id: "00000000:%02x:%02x.0"\n    memory_mib: 81559\n    load: { utilization: 80 }\n    processes:\n' $(((16 + g) % 256)) $(((16 + g) / 256))
  for ((p = g; p < PODS; p += GPUS)); do
    printf '      - { pid: %d, name: worker, memory_mib: %d, sm_utilization: %d }\n' $((10000 + p)) $((100 + p)) $((1 + p % 50))
  done
done
echo "pods:"
for ((p = 0; p < PODS; p++)); do
  printf '  - namespace: ns-%d\n    name: worker-%d\n    uid: %08x-0000-4000-8000-00000000beef\n' $((p % 10)) "$p" "$p"
  printf '    owner: { kind: Deployment, name: worker-%d }\n    labels: { team: team-%d }\n' $((p % 10)) $((p % 10))
  printf '    containers:\n      - name: main\n        id: %064x\n' "$p"
  if [ "$CLAIMS" = 1 ] && [ $((p % GPUS % 2)) = 1 ]; then
    printf '        claims: [ { name: worker-%d-gpu, share_id: share-%d, devices: [GPU-%08x-0000-4000-8000-00000000abcd] } ]\n' "$p" "$p" $((p % GPUS))
  else
    printf '        devices: [ { resource: nvidia.com/gpu, ids: ["GPU-%08x-0000-4000-8000-00000000abcd::%d"] } ]\n' $((p % GPUS)) $((p / GPUS))
  fi
  printf '        pids: [%d]\n' $((10000 + p))
done
