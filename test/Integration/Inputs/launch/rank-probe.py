# Prints where Open MPI put this rank (dsc-launch-mpi.test checks it against
# dsc-launch's rank table) and exits with --exit-code on --exit-rank.
import argparse
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--exit-rank", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=0)
args = parser.parse_args()
env = os.environ
rank = int(env["OMPI_COMM_WORLD_RANK"])
print(f"probe: rank {rank} local {env['OMPI_COMM_WORLD_LOCAL_RANK']} of "
      f"{env['OMPI_COMM_WORLD_LOCAL_SIZE']} world {env['OMPI_COMM_WORLD_SIZE']} "
      f"master {env['MASTER_ADDR']}:{env['MASTER_PORT']} "
      f"threads {env.get('OMP_NUM_THREADS')}", flush=True)
sys.exit(args.exit_code if rank == args.exit_rank else 0)
