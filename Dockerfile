# Image for node, web, worker and beat (docker-compose.yml). Build: docker build -t lifecycle-store .
FROM node:20-bookworm-slim AS ui
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
COPY --from=ui /src/frontend/dist /app/frontend/dist
RUN pip install --no-cache-dir --no-deps -e .
ENV PYTHONUNBUFFERED=1
EXPOSE 8000 7070
