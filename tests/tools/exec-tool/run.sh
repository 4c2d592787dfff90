#!/bin/sh
# Test fixture: runtime exec runs this file itself.
echo "{\"pong\": \"$1\"}"
