#!/usr/bin/env bash
# First statement: the time this process started (bash's clock needs no fork).
started=$EPOCHREALTIME
echo "{\"started\": ${started}}"
