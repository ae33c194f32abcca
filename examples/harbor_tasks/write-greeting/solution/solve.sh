#!/bin/sh
echo 'hello, harbor' > /app/greeting.txt
