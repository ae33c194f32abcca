#!/bin/sh
wc -l < /app/words.txt | tr -d ' ' > /app/answer.txt
