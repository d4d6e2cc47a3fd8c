// RUN: dsc-opt %s --dsc-estimate-inference="cluster=%dsc_src_root/examples/clusters/dgx-h100-80gb.json tp=2 batch=32 context=1024 prompt=512" -o /dev/null 2>&1 | FileCheck %s
// RUN: dsc-opt %s --dsc-estimate-inference="cluster=%dsc_src_root/examples/clusters/dgx-h100-80gb.json tp=2 context=1024 objective=throughput" -o /dev/null 2>&1 | FileCheck %s --check-prefix=THROUGHPUT
// RUN: not dsc-opt %s --dsc-estimate-inference="cluster=%dsc_src_root/examples/clusters/dgx-h100-80gb.json tp=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not dsc-opt %s --dsc-estimate-inference="cluster=%dsc_src_root/examples/clusters/dgx-h100-80gb.json tp=16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NODE
// RUN: not dsc-opt %s --dsc-estimate-inference="tp=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLUSTER

// GPT-2 small (124,475,904 parameters, 12 layers, 12 heads of 64) in bf16
// at tp=2 on an H100 (80 GB, 2 GB reserved):
//   weights 124475904 x 2 / 2 = 0.124 GB per GPU;
//   KV cache 2 (keys, values) x 12 layers x 12/2 heads x 64 x 2 bytes
//     = 18432 B = 18.4 KB per token, x 1024 = 18.9 MB per sequence;
//   the largest batch: (78e9 - 0.124e9) / 18874368 = 4125.98 -> 4125.
// A model this small decodes faster without tensor slicing (its step is
// the all-reduces' latency): the search picks tp=1.
// CHECK: remark: --dsc-estimate-inference: tp=2 bf16 on H100-SXM5-80GB: weights 0.12 GB per GPU, KV cache 18.4 KB per token (18.9 MB per sequence of 1024); decode {{[0-9.]+}} ms per token at batch 1 (floor {{[0-9.]+}} ms: weight bytes / bandwidth + 2 all-reduces per layer), {{[0-9.]+}} ms per step at batch 32 ({{[0-9]+}} tokens/s); prefill of 512 tokens {{[0-9.]+}} ms; the largest batch at context 1024: 4125 sequences; for latency the search picks tp=1
// At tp=1 the cache per token doubles: (78e9 - 0.249e9) / 37748736 = 2059.7.
// THROUGHPUT: for throughput the search picks tp=1 at batch 2059:
// HEADS: error: --dsc-estimate-inference: tp=5 does not divide the 12 heads and 12 kv heads
// NODE: error: --dsc-estimate-inference: tp=16 spans more than a node's 8 GPUs
// CLUSTER: error: --dsc-estimate-inference: needs cluster=FILE
module attributes {dsc.model = {hidden_size = 768 : i64, max_position_embeddings = 1024 : i64, micro_batch_size = 4 : i64, num_attention_heads = 12 : i64, num_layers = 12 : i64, parameters = 124475904 : i64, seq_length = 1024 : i64, vocab_size = 50304 : i64}} {
}
