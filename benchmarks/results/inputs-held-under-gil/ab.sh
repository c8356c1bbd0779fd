#!/bin/bash
# ../lone-mean/ab.sh over this change's cases, the build of a1de6df as $BASE: $1 rounds.
exec $(dirname $0)/../lone-mean/ab.sh $1 resnet20:float32 resnet20:bfloat16 mlp:float32 bert_base:float32
