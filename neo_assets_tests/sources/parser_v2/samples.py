"""Real-world-shaped sources per language (cobra, walkdir, JDK/.NET, Rails, Laravel
styles), shared by the parser 2.x tests."""

GO = """\
// Copyright 2013-2023 The Cobra Authors
package cobra

import (
\t"fmt"
\t"io"
)

// Command is just that, a command for your application.
type Command struct {
\t// Use is the one-line usage message.
\tUse string
\tout io.Writer
}

type (
\tPositionalArgs func(cmd *Command, args []string) error
\tHook           interface{ Run() }
)

// Execute uses the args (os.Args[1:] by default)
// and run through the command tree.
func (c *Command) Execute() error {
\t_, err := c.ExecuteC()
\treturn err
}

func (c Command[T]) Name() string { return c.Use }

// Eq returns whether a equals b.
func Eq(a, b string) bool {
\treturn a == b
}
"""

RUST = """\
//! Crate docs.
use std::path::Path;

/// A builder to create an iterator for recursively walking a directory.
#[derive(Debug)]
pub struct WalkDir {
    opts: WalkDirOptions,
    root: PathBuf,
}

impl WalkDir {
    /// Create a builder for a recursive directory iterator.
    pub fn new<P: AsRef<Path>>(root: P) -> Self {
        WalkDir { opts: WalkDirOptions::default(), root: root.as_ref().to_path_buf() }
    }

    pub fn min_depth(mut self, depth: usize) -> Self {
        self.opts.min_depth = depth;
        self
    }
}

impl IntoIterator for WalkDir {
    type Item = Result<DirEntry>;

    fn into_iter(self) -> IntoIter {
        IntoIter { opts: self.opts }
    }
}

pub enum Error {
    Io(std::io::Error),
}

fn is_same_file(a: &Path) -> bool {
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn walks() {
        assert!(true);
    }
}
"""

C = """\
#include <stdio.h>

/* A point on the plane. */
typedef struct point {
    int x;
    int y;
} point_t;

struct list {
    struct list *next;
};

/* Distance squared from the origin. */
static int norm2(const point_t *p)
{
    return p->x * p->x + p->y * p->y;
}

#ifdef DEBUG
void dump(const point_t *p) { printf("%d %d\\n", p->x, p->y); }
#endif

int main(void)
{
    return 0;
}
"""

CPP = """\
#include <string>

namespace gfx {

// A drawable widget.
template <typename T>
class Widget : public Base {
public:
    explicit Widget(T value) : value_(value) {}
    void draw() const;

    struct Style {
        int color;
        int width() const { return 1; }
    };

private:
    T value_;
};

}  // namespace gfx

void gfx::Widget::draw() const {
    render(value_);
}

int main() { return 0; }
"""

JAVA = """\
package org.example.cache;

import java.util.Map;

/**
 * A least-recently-used cache.
 */
@ThreadSafe
public class LruCache<K, V> {
    private final int capacity;

    /** Creates a cache holding at most {@code capacity} entries. */
    public LruCache(int capacity) {
        this.capacity = capacity;
    }

    @Override
    public V get(K key) {
        return null;
    }

    static final class Node<K, V> {
        K key;

        Node<K, V> next() {
            return null;
        }
    }

    enum Policy {
        LRU, LFU;

        boolean evicts() { return true; }
    }
}
"""

CSHARP = """\
using System;

namespace Acme.Billing
{
    /// <summary>An invoice.</summary>
    [Serializable]
    public class Invoice
    {
        public decimal Total { get; set; }

        public Invoice(decimal total)
        {
            Total = total;
        }

        /// <summary>Adds tax.</summary>
        public decimal WithTax(decimal rate)
        {
            return Total * (1 + rate);
        }
    }

    public interface IPayable
    {
        void Pay();
    }
}
"""

RUBY = """\
require "json"

module Billing
  # An invoice with line items.
  class Invoice < ApplicationRecord
    TAX = 0.2

    has_many :items

    # Total with tax.
    def total
      items.sum(&:price) * (1 + TAX)
    end

    def self.open
      where(open: true)
    end

    class << self
      def build(attrs)
        new(attrs)
      end
    end
  end
end

def helper
  1
end
"""

PHP = """\
<?php

namespace App\\Http\\Controllers;

use Illuminate\\Http\\Request;

/**
 * Handles users.
 */
#[Controller]
class UserController extends Controller
{
    protected $model = User::class;

    /**
     * Show a user.
     */
    public function show(Request $request, int $id)
    {
        return view('user', ['id' => $id]);
    }
}

function helper(): int
{
    return 1;
}
"""

BASH = """\
#!/usr/bin/env bash
set -euo pipefail

# Print usage and exit.
usage() {
  echo "usage: $0 [-v]"
  exit 1
}

function main {
  usage
}

main "$@"
"""
