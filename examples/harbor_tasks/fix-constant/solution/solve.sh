#!/bin/sh
sed -i 's/^PI = .*/PI = 3.14159/' /app/area.py
