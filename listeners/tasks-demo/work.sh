# The demo's worker: $1 the task, $2 the attempt, $3 why the last attempt failed.
# Prints its context delta: `+ path` added, `~ path` changed, other lines the summary.
set -e
mkdir -p out
case "$1" in
  T-001) echo base > out/a.txt; echo "+ out/a.txt"; echo "wrote the base" ;;
  T-002) cat out/a.txt > out/b.txt; echo left >> out/b.txt; echo "+ out/b.txt"; echo "left branch" ;;
  T-003)
    # The first attempt gets it wrong; the retry reads the feedback and fixes it.
    if [ "$2" = 1 ]; then echo rigth > out/c.txt; else echo right > out/c.txt; fi
    echo "+ out/c.txt"; echo "right branch, attempt $2" ;;
  T-004) cat out/b.txt out/c.txt > out/d.txt; echo "+ out/d.txt"; echo "joined both branches" ;;
  T-005) echo "never enough" > out/e.txt; echo "+ out/e.txt"; echo "tried" ;;
  T-006) echo "+ out/f.txt"; echo "never runs: T-005 is blocked" ;;
esac
