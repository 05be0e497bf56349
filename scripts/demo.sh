#!/usr/bin/env bash
# make demo: answers a prompt with a real model when one is available, else a synthesized one.
set -euo pipefail
SHOAL=$1 MODEL=${2:-} SHARED=${3:-../shared} PROMPT=${4:-Once upon a time}

if [ -z "$MODEL" ]; then
  if [ -f "$SHARED/models/stories260K.gguf" ]; then
    MODEL="$SHARED/models/stories260K.gguf"
  else
    MODEL=build/demo-tiny-q8_0.gguf
    [ -f "$MODEL" ] || "$SHOAL" synth --arch llama --preset tiny --type q8_0 -o "$MODEL"
  fi
fi
echo "== shoal $("$SHOAL" --version | cut -d' ' -f2-)"
echo "== model: $MODEL"
"$SHOAL" info -m "$MODEL" | head -8
echo "== prompt: $PROMPT"
"$SHOAL" run -m "$MODEL" -p "$PROMPT" -n 96 --temp 0.7 --seed 42
