# Test fixture: a bash tool; prints its action, argument count and the python3 it would run.
printf '{"action": "%s", "argc": %d, "python3": "%s"}\n' "$1" "$#" "$(command -v python3)"
