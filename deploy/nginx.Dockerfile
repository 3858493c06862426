# nginx from Debian's package, with the repository's config (deploy/nginx.conf, deploy/nginx-nodes.conf).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nginx && rm -rf /var/lib/apt/lists/*
COPY deploy/nginx.conf deploy/nginx-nodes.conf /etc/nginx/
EXPOSE 80
CMD ["nginx", "-g", "daemon off;"]
