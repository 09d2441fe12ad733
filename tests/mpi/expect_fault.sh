#!/bin/sh
# expect_fault.sh BOUND_S REGEX COMMAND...: passes when COMMAND ends by itself within BOUND_S
# seconds, with a non-zero exit code, and its output matches the extended regex REGEX (and
# EXPECT_FAULT_ALSO, and not EXPECT_FAULT_NOT, where those are set).
bound=$1
regex=$2
shift 2
start=$(date +%s)
out=$(timeout -k 5 "$bound" "$@" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
printf '%s\n' "$out"
echo "expect_fault: exit code $rc after ${elapsed} s"
# mpirun itself exits 137 when a rank was SIGKILLed, so judge a timeout by the clock.
if [ "$rc" -eq 124 ] || [ "$elapsed" -ge "$bound" ]; then
  echo "expect_fault: FAIL: still running after ${bound} s"
  exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "expect_fault: FAIL: the job ended with exit code 0"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq "$regex"; then
  echo "expect_fault: FAIL: no line matches: $regex"
  exit 1
fi
if [ -n "${EXPECT_FAULT_ALSO:-}" ] && ! printf '%s\n' "$out" | grep -Eq "$EXPECT_FAULT_ALSO"; then
  echo "expect_fault: FAIL: no line matches: $EXPECT_FAULT_ALSO"
  exit 1
fi
if [ -n "${EXPECT_FAULT_NOT:-}" ] && printf '%s\n' "$out" | grep -Eq "$EXPECT_FAULT_NOT"; then
  echo "expect_fault: FAIL: a line matches: $EXPECT_FAULT_NOT"
  exit 1
fi
echo "expect_fault: PASS"
