#===- bench/gpt2-small-shape.sh - GPT-2 small at a benchmark's shape -----===#
#
# Sourced by the benchmarks that train GPT-2 small: examples/configs/
# gpt2-small.yml at sequence length $1 (positions too) and micro-batch $2,
# written to $3. One rule, so every benchmark's model is the same one.
#
#===-----------------------------------------------------------------------===#

# gpt2_small_at SEQ BATCH OUT_YML (ROOT: the repository).
gpt2_small_at() {
  sed -e "s/^seq-length: .*/seq-length: $1/" \
      -e "s/^max-position-embeddings: .*/max-position-embeddings: $1/" \
      -e "s/^train_micro_batch_size_per_gpu: .*/train_micro_batch_size_per_gpu: $2/" \
      "$ROOT/examples/configs/gpt2-small.yml" > "$3"
}
